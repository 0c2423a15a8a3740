package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ContainerConfig is the body of a container create: the fields mozi
// sets, named as the API names them.
type ContainerConfig struct {
	Image string `json:"Image"`
	// Entrypoint [""] clears the image's entrypoint, so Cmd runs as is.
	Entrypoint []string          `json:"Entrypoint"`
	Cmd        []string          `json:"Cmd"`
	Env        []string          `json:"Env,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	User       string            `json:"User,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	// Stdin: OpenStdin with StdinOnce closes the process's stdin when
	// the attached client closes its side.
	AttachStdin  bool       `json:"AttachStdin"`
	AttachStdout bool       `json:"AttachStdout"`
	AttachStderr bool       `json:"AttachStderr"`
	OpenStdin    bool       `json:"OpenStdin"`
	StdinOnce    bool       `json:"StdinOnce"`
	Tty          bool       `json:"Tty"`
	StopSignal   string     `json:"StopSignal,omitempty"`
	HostConfig   HostConfig `json:"HostConfig"`
}

// HostConfig is where and how bounded a container runs.
type HostConfig struct {
	NetworkMode string  `json:"NetworkMode,omitempty"`
	Mounts      []Mount `json:"Mounts,omitempty"`
	// Memory in bytes (0: unbounded); MemorySwap equal to it forbids
	// swapping beyond it.
	Memory      int64    `json:"Memory,omitempty"`
	MemorySwap  int64    `json:"MemorySwap,omitempty"`
	PidsLimit   *int64   `json:"PidsLimit,omitempty"`
	Ulimits     []Ulimit `json:"Ulimits,omitempty"`
	Init        *bool    `json:"Init,omitempty"`
	SecurityOpt []string `json:"SecurityOpt,omitempty"`
	AutoRemove  bool     `json:"AutoRemove"`
}

// Mount is a bind mount.
type Mount struct {
	Type     string `json:"Type"` // "bind"
	Source   string `json:"Source"`
	Target   string `json:"Target"`
	ReadOnly bool   `json:"ReadOnly"`
}

// Ulimit is one resource limit ("nofile", "nproc", "cpu").
type Ulimit struct {
	Name string `json:"Name"`
	Soft int64  `json:"Soft"`
	Hard int64  `json:"Hard"`
}

// CreateContainer creates a container (named name, "" for a generated
// name) and returns its id.
func (c *Client) CreateContainer(ctx context.Context, name string, cfg ContainerConfig) (string, error) {
	var q url.Values
	if name != "" {
		q = url.Values{"name": {name}}
	}
	var out struct {
		ID string `json:"Id"`
	}
	op := "create container of image " + strconv.Quote(cfg.Image)
	if err := c.call(ctx, op, http.MethodPost, "/containers/create", q, cfg, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("%s: the engine gave no id", op)
	}
	return out.ID, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	return c.call(ctx, "start container "+short(id), http.MethodPost, "/containers/"+id+"/start", nil, nil, nil)
}

// WaitResult is how a container ended.
type WaitResult struct {
	StatusCode int `json:"StatusCode"`
	Error      *struct {
		Message string `json:"Message"`
	} `json:"Error"`
}

// WaitContainer waits until the container is not running and returns
// its exit status.
func (c *Client) WaitContainer(ctx context.Context, id string) (int, error) {
	var out WaitResult
	op := "wait for container " + short(id)
	if err := c.call(ctx, op, http.MethodPost, "/containers/"+id+"/wait", url.Values{"condition": {"not-running"}}, nil, &out); err != nil {
		return -1, err
	}
	if out.Error != nil && out.Error.Message != "" {
		return -1, fmt.Errorf("%s: %s", op, out.Error.Message)
	}
	return out.StatusCode, nil
}

// StopContainer sends the container's stop signal (SIGTERM unless it
// says otherwise) and SIGKILL after grace, rounded up to whole seconds
// as the API counts. It returns once the container stopped. Stopping a
// stopped container is no error.
func (c *Client) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	secs := int64((grace + time.Second - 1) / time.Second)
	return c.call(ctx, "stop container "+short(id), http.MethodPost, "/containers/"+id+"/stop",
		url.Values{"t": {strconv.FormatInt(max(secs, 0), 10)}}, nil, nil)
}

// KillContainer sends signal (e.g. "KILL") to the container's process.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	return c.call(ctx, "kill container "+short(id), http.MethodPost, "/containers/"+id+"/kill",
		url.Values{"signal": {signal}}, nil, nil)
}

// RemoveContainer removes a container, killing it first if it runs.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	return c.call(ctx, "remove container "+short(id), http.MethodDelete, "/containers/"+id,
		url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
}

// ContainerSummary is one container of a list.
type ContainerSummary struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Image  string            `json:"Image"`
	Labels map[string]string `json:"Labels"`
	State  string            `json:"State"`
}

// ListContainers lists the containers, running or not, that carry every
// label given ("key=value", or "key" for any value).
func (c *Client) ListContainers(ctx context.Context, labels ...string) ([]ContainerSummary, error) {
	q := url.Values{"all": {"1"}}
	if len(labels) > 0 {
		f, err := json.Marshal(map[string][]string{"label": labels})
		if err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
		q.Set("filters", string(f))
	}
	var out []ContainerSummary
	if err := c.call(ctx, "list containers", http.MethodGet, "/containers/json", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ContainerInfo is what an inspect says of a container (the fields mozi
// reads).
type ContainerInfo struct {
	ID    string `json:"Id"`
	Name  string `json:"Name"`
	State struct {
		Status    string `json:"Status"`
		Running   bool   `json:"Running"`
		OOMKilled bool   `json:"OOMKilled"`
		ExitCode  int    `json:"ExitCode"`
		Error     string `json:"Error"`
	} `json:"State"`
	Config struct {
		Image  string            `json:"Image"`
		Cmd    []string          `json:"Cmd"`
		Env    []string          `json:"Env"`
		User   string            `json:"User"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig struct {
		NetworkMode string   `json:"NetworkMode"`
		Memory      int64    `json:"Memory"`
		PidsLimit   *int64   `json:"PidsLimit"`
		Ulimits     []Ulimit `json:"Ulimits"`
	} `json:"HostConfig"`
	Mounts []struct {
		Type        string `json:"Type"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
		RW          bool   `json:"RW"`
	} `json:"Mounts"`
}

// InspectContainer describes a container.
func (c *Client) InspectContainer(ctx context.Context, id string) (ContainerInfo, error) {
	var out ContainerInfo
	err := c.call(ctx, "inspect container "+short(id), http.MethodGet, "/containers/"+id+"/json", nil, nil, &out)
	return out, err
}

// short is a container id as errors show it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
