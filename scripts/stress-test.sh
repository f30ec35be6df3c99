#!/usr/bin/env bash
# Stress run: the tests that use the kernel (network namespaces, iptables, tcpdump, the lab), run
# twice at the same time while two CPU hogs (`yes > /dev/null`) keep the cores busy. It proves the
# kernel tests wait for conditions rather than for time, take the xtables lock with -w, and do not
# step on each other's namespaces. Exits non-zero when either run fails.
#
#   sudo bash scripts/stress-test.sh            # as root, like CI; takes several minutes
#   STRESS_RUNS=3 bash scripts/stress-test.sh   # three runs at once instead of two
#
# The kernel tests are the test files that ask src/lab/kernel-guard (kernelSkip) or lab/netns
# (labUnavailableReason) whether they may run; each run goes through scripts/test.mjs, as npm test
# does. The e2e tests among them spawn the built CLI, so it is built first. Logs: $STRESS_LOGS
# (default: a new folder under /tmp), one per run.
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${STRESS_RUNS:-2}"
logs="${STRESS_LOGS:-$(mktemp -d /tmp/podpath-stress.XXXXXX)}"
mkdir -p "$logs"

# (the HTML rendering test asks too, for its one lab replay page; it is a browser test, left out)
mapfile -t files < <(grep -lE 'kernelSkip\(|labUnavailableReason\(' -r --include='*.test.ts' src test |
  grep -v 'html-chromium' | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "stress: no kernel tests found" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "stress: not root: the kernel tests would skip, which proves nothing" >&2
  exit 1
fi

echo "stress: building the CLI (the e2e kernel tests spawn dist/cli/main.js)"
npx tsc -p tsconfig.build.json || exit 1

hogs=()
stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done
  hogs=()
}
trap stop_hogs EXIT INT TERM
for _ in 1 2; do
  yes >/dev/null &
  hogs+=("$!")
done

echo "stress: ${#files[@]} kernel test files, $runs runs at once, 2 CPU hogs; logs in $logs"
start=$(date +%s)
pids=()
for i in $(seq 1 "$runs"); do
  node scripts/test.mjs "${files[@]}" >"$logs/run-$i.log" 2>&1 &
  pids+=("$!")
done
failed=0
for i in $(seq 1 "$runs"); do
  if wait "${pids[$((i - 1))]}"; then code=0; else code=$?; fi
  [ "$code" -eq 0 ] || failed=1
  # node:test's closing counts (spec reporter: "ℹ pass N"; tap, with CI set: "# pass N")
  summary=$(grep -E '^(ℹ|#) (tests|pass|fail|skipped|cancelled) ' "$logs/run-$i.log" |
    sed -E 's/^(ℹ|#) //' | tr '\n' ' ')
  echo "stress: run $i exit $code: $summary"
done
stop_hogs
elapsed=$(($(date +%s) - start))
echo "stress: $((elapsed / 60)) min $((elapsed % 60)) s for $runs runs at once under 2 CPU hogs"
if [ "$failed" -ne 0 ]; then
  echo "stress: FAILED (see $logs; the failing tests are listed at the end of each log)" >&2
  exit 1
fi
echo "stress: passed"
