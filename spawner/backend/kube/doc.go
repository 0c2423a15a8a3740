// Package kube runs agent processes as Kubernetes Jobs: one Job per
// attempt, its checkout made in the pod by an init container, its output
// read from the pod's log stream.
//
// Invariants:
//   - mozi owns retries: a Job never restarts its pod (backoffLimit 0,
//     restartPolicy Never).
//   - Secrets (the agent's token, every environment value, the prompt and
//     stdin) travel in a Secret per attempt, owned by its Job so that they
//     go with it; the Job's and the pod's specs name keys, never values.
//   - Everything created carries the labels backend.LabelTask,
//     LabelAttempt, LabelOwner and LabelScope, so that Sweep finds what a
//     dead replica left by label alone.
//   - When the cluster cannot take a run (unreachable, or the pod cannot be
//     scheduled), Start fails with backend.ErrUnavailable and leaves
//     nothing behind: the task waits, it never runs somewhere else.
package kube
