#!/bin/sh
# The entry point of the mcpstate bundle on Linux and macOS: runs the mcpstate
# binary built for this machine's CPU, which lies beside it.
dir=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
case "$(uname -m)" in
  x86_64 | amd64) arch=x86_64 ;;
  arm64 | aarch64) arch=aarch64 ;;
  *)
    echo "mcpstate: this bundle has no binary for the CPU $(uname -m)." >&2
    exit 1
    ;;
esac
exec "$dir/mcpstate-$arch" "$@"
