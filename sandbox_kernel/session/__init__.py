"""One sandbox session, under every front door: the backend made by name, the cell pipeline
(output policy, widget rules, budget), results, shell commands and variable transfer."""
