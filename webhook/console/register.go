package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// App is an OAuth2 application as Gitea created it.
type App struct {
	ID           int64
	Name         string
	ClientID     string
	ClientSecret string // Gitea shows it once, on creation
}

// Register creates mozi's OAuth2 application in Gitea, owned by the user
// of token, that sends users back to redirectURL.
func Register(ctx context.Context, client *http.Client, giteaURL, token, name, redirectURL string) (App, error) {
	body, err := json.Marshal(map[string]any{"name": name, "redirect_uris": []string{redirectURL},
		"confidential_client": true})
	if err != nil {
		return App{}, fmt.Errorf("register the console: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		strings.TrimSuffix(giteaURL, "/")+"/api/v1/user/applications/oauth2", bytes.NewReader(body))
	if err != nil {
		return App{}, fmt.Errorf("register the console: %w", err)
	}
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return App{}, fmt.Errorf("register the console in Gitea: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&msg)
		return App{}, fmt.Errorf("register the console in Gitea: it answered %d %s", resp.StatusCode, msg.Message)
	}
	var out struct {
		ID           int64  `json:"id"`
		Name         string `json:"name"`
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return App{}, fmt.Errorf("register the console in Gitea: read its answer: %w", err)
	}
	if out.ClientID == "" || out.ClientSecret == "" {
		return App{}, errors.New("register the console in Gitea: its answer has no client id or secret")
	}
	return App(out), nil
}
