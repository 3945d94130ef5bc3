#!/bin/sh
# Fails on any include of a higher layer or of another layer's private header (scripts/check_layers.py).
exec python3 "$(dirname "$0")/check_layers.py" "$@"
