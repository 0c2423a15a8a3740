// Package prompts builds what an agent is told: a prompt of sections in
// layers (L0 iron rules, L1 role, nine L2 engine sections, L3 skills), each
// rendered from the toolchain templates, each within its own size budget,
// and all within a total budget, so no issue body or comment thread can
// blow a prompt up.
//
// Invariants: a prompt never contains a secret (an agent's token is named
// by its environment variable, never valued); no template placeholder
// survives rendering; cuts are marked and never split a UTF-8 sequence.
package prompts
