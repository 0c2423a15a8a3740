package config

import (
	"cmp"
	"net"
	"net/url"
	"time"
)

// Console configures the web console (docs/console.md). It is off unless
// Listen is set.
type Console struct {
	// Listen is the console's own HTTP address, apart from the webhook
	// endpoint's, so it can be exposed on its own ("": no console).
	Listen string `yaml:"listen"`
	// PublicURL is where browsers reach the console; Gitea sends users
	// back to PublicURL + /auth/callback. An https URL makes the session
	// cookie Secure.
	PublicURL string       `yaml:"public_url"`
	OAuth     ConsoleOAuth `yaml:"oauth"`
	// AnonymousRead lets anyone who reaches the console read every task
	// and run without signing in (actions still need a signed-in user
	// with write access). Off by default.
	AnonymousRead bool `yaml:"anonymous_read"`
	// SessionTTL is how long a sign-in lasts (default 12h).
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// ConsoleOAuth names mozi's OAuth2 application in Gitea (mozi console
// register creates it).
type ConsoleOAuth struct {
	ClientID string `yaml:"client_id"`
	// ClientSecretEnv names the variable holding the client secret (or
	// its _FILE twin); default MOZI_CONSOLE_CLIENT_SECRET.
	ClientSecretEnv string `yaml:"client_secret_env"`
}

// DefaultConsoleSecretEnv is where the console's OAuth2 client secret is
// read from unless console.oauth.client_secret_env says otherwise.
const DefaultConsoleSecretEnv = "MOZI_CONSOLE_CLIENT_SECRET"

// DefaultConsoleSessionTTL is how long a console sign-in lasts.
const DefaultConsoleSessionTTL = 12 * time.Hour

// Enabled reports whether mozi serve starts the console.
func (c Console) Enabled() bool { return c.Listen != "" }

// ClientSecret reads the OAuth2 client secret from its variable or file.
func (c Console) ClientSecret(getenv func(string) string) (Secret, error) {
	v, _, err := secretFromEnv(getenv, cmp.Or(c.OAuth.ClientSecretEnv, DefaultConsoleSecretEnv))
	return Secret(v), err
}

// TTL is the session lifetime, defaulted.
func (c Console) TTL() time.Duration { return cmp.Or(c.SessionTTL, DefaultConsoleSessionTTL) }

func (c *Config) validateConsole(p *problems) {
	if !c.Console.Enabled() {
		return
	}
	if _, _, err := net.SplitHostPort(c.Console.Listen); err != nil {
		p.add("console.listen", "%q is not host:port", c.Console.Listen)
	}
	if u, err := url.Parse(c.Console.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add("console.public_url", "%q is not an http(s) URL (Gitea sends users back to it)", c.Console.PublicURL)
	}
	if c.Console.OAuth.ClientID == "" {
		p.add("console.oauth.client_id", "is empty: register mozi in Gitea with mozi console register")
	}
	if c.Gitea.URL == "" {
		p.add("gitea.url", "is empty: the console signs users in with Gitea: set gitea.url")
	}
	if c.Console.SessionTTL < 0 {
		p.add("console.session_ttl", "must not be negative, got %s", c.Console.SessionTTL)
	}
}
