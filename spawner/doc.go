// Package spawner runs agent processes: it resolves an agent's command (its
// own argv or a preset for a known CLI), gives it the prompt, a minimal
// environment and its own process group, enforces wall-clock and cost
// budgets by killing the whole group, and records each run as a task attempt.
package spawner
