"""The retrieval evaluation set: notes, queries and the notes each query should find."""
