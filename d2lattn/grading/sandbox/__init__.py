"""The sandbox: bubblewrap and its seccomp filter, the runner inside it, and the session that
drives one submission's sandboxes (a fresh one per group of questions)."""
