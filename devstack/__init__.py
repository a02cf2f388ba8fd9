"""The development stack: what `make run`, the end-to-end tests, the soak and the benches
start (`run.py` is `make run`; `stack.py` holds its manifests, process control, pid files
and Kubernetes helpers). Not part of the Django project or of any deployed image."""
