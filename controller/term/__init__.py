"""One leader term, one component per file: see controller/term/README.md and docs/term.md.

Nothing is imported here, so `controller.recovery` can use `controller.term.host` without
importing the components that start recovery."""
