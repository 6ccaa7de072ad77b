"""The vocabulary every layer shares: the events a backend emits (:mod:`.events`), their IOPub
form (:mod:`.iopub`), and the whole exception tree (:mod:`.errors`). Imports nothing of ours."""
