#!/bin/sh
# No-op coverage tool (offline stand-in, see WORKSPACE).
exit 0
