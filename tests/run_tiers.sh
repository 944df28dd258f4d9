#!/usr/bin/env bash
# Runs the test tiers one after another and prints each tier's wall time; fails if any tier failed,
# after all of them ran (CI must see every failure). Each tier's own pytest options come from
# PYTEST_<TIER> (the Makefile sets them: pytest-xdist only where it measured faster).
#
#   tests/run_tiers.sh PYTHON unit pipeline cluster
set -u
python=$1
shift
failed=()
summary=()
for tier in "$@"; do
    options_var="PYTEST_${tier^^}"
    started=$(date +%s)
    # shellcheck disable=SC2086  # the options are words on purpose
    "$python" -m pytest -q --durations=40 --tier "$tier" ${!options_var:-} tests || failed+=("$tier")
    summary+=("tier $tier: $(( $(date +%s) - started )) s")
    echo "== ${summary[-1]}"
done
printf '== %s\n' "${summary[@]}"
if (( ${#failed[@]} )); then
    echo "== failed tiers: ${failed[*]}" >&2
    exit 1
fi
