"""Memory: durable facts the assistant keeps across chats and recipe runs, one fact a row, in
a personal scope (one user's; everything the AI stores lands there) and a shared scope (the
workspace's; only people write it)."""
