"""The store: SQLModel tables, engine set-up and plain query functions. Depends on nothing else of ours."""
