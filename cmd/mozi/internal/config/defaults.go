package config

import "time"

// The defaults this package owns: what only mozi serve decides. Every other
// default applyDefaults fills in is a constant of the package that uses the
// setting (dispatcher.DefaultLeaseTTL, ticker.DefaultRetention…), so that a
// package used on its own and mozi serve agree.
const (
	// DefaultListen is where mozi serves webhooks, metrics and the API.
	DefaultListen = "127.0.0.1:8080"
	// DefaultDatabaseMaxConns caps mozi serve's connection pool: its
	// writers, workers, runs and ticker at their defaults, with room.
	DefaultDatabaseMaxConns int32 = 16
	// DefaultShutdownGrace is how long running agents may finish when mozi
	// stops (spawner.shutdown_grace).
	DefaultShutdownGrace = 30 * time.Second
	DefaultLogLevel      = "info"
	DefaultLogFormat     = "text"
)

// Sandbox defaults. They belong to spawner/sandbox, which is being
// reworked behind spawner/backend; they move there with it.
const (
	DefaultBwrap       = "bwrap"
	DefaultSandboxUser = "nobody"
	// Each sandboxed run's limits (Limits).
	DefaultAgentMemory    ByteSize = 8 << 30
	DefaultAgentProcesses          = 1024
	DefaultAgentCPUTime            = 2 * time.Hour
	DefaultAgentOpenFiles          = 8192
)

// Defaults of the Kubernetes backend's settings (they move to
// spawner/backend/kube with it).
const (
	DefaultKubeTTLAfterFinished = 10 * time.Minute
)
