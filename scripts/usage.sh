# Sourced first by the shell scripts in scripts/ and bench/: `-h` or `--help` as the first argument prints the
# script's header comment (its usage) and exits 0, before the script does anything, where gpu-pack.sh made a
# folder named --help and gpu-check.sh started its build.
#   . "$(dirname "$0")/usage.sh" "$@"
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,/^[^#]/{/^#/{s/^# \{0,1\}//;p;};}' "$0"
  exit 0
fi
