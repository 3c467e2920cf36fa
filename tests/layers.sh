#!/usr/bin/env bash
# Arrows point down (docs/design.md, "Arrows"): a file of src/ includes
# headers of its own layer and of lower ones only. Lists every include of
# one folder's header from another and fails on
#   - an upward include that is not one of the known exceptions below,
#   - a known exception that is gone (delete its line here and in the design),
#   - a folder of src/ that has no place in the order (give it one).
# With BUILD_DIR, also: within each folder, no circle of files, a file
# calling into another that calls back (tests/file_circles.py, from the
# objects' symbols). A circle makes two files one module in two rooms.
# And no file of src/ over 600 lines, no function over 120
# (tests/room_sizes.py).
# Usage: tests/layers.sh [BUILD_DIR]   (prints "layers: N passed, M failed")
set -u
cd "$(dirname "$0")/.."

# From the bottom.
ORDER=(util nn optim data comm ps run sync train cli)

# Upward includes allowed, "FILE HEADER" (HEADER as a path under src/):
# none today. One added here must also be explained in docs/design.md.
ALLOW=()

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

rank_of() {   # the layer's index in ORDER, or -1
    local i
    for i in "${!ORDER[@]}"; do
        [ "${ORDER[$i]}" = "$1" ] && { echo "$i"; return; }
    done
    echo -1
}

declare -A seen=()
for dir in src/*/; do
    dir=${dir%/}
    layer=$(basename "$dir")
    lr=$(rank_of "$layer")
    if [ "$lr" -lt 0 ]; then
        bad "src/$layer" "not in the layer order; place it in ORDER in tests/layers.sh and in docs/design.md"
        continue
    fi
    down=0 allowed=0 up=0
    # every source of the layer, its family folders (src/sync/ps, ...) included
    while IFS= read -r f; do
        # every quoted include, resolved against the including file's folder:
        # "../X/h.h" from src/L/ or "../../X/h.h" from src/L/F/ name layer X
        while IFS=: read -r line inc; do
            path=$(realpath -m --relative-to=src "$(dirname "$f")/$inc")
            case $path in ../*) bad "$f:$line" "includes $inc, which is outside src/"; continue ;; esac
            target=${path%%/*}
            [ "$target" = "$layer" ] && continue
            tr=$(rank_of "$target")
            if [ "$tr" -lt 0 ]; then
                bad "$f:$line" "includes $inc from '$target', which is not a layer of src/"
            elif [ "$tr" -lt "$lr" ]; then
                down=$((down + 1))
            else
                entry="$f $path"
                known=0
                for a in "${ALLOW[@]+"${ALLOW[@]}"}"; do [ "$a" = "$entry" ] && known=1; done
                if [ $known = 1 ]; then
                    allowed=$((allowed + 1))
                    seen[$entry]=1
                else
                    up=$((up + 1))
                    bad "$f:$line" "includes $inc: $layer is below $target (arrows point down; docs/design.md, \"Arrows\")"
                fi
            fi
        done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$f" |
                 sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
    done < <(find "$dir" -name '*.[ch]' | sort)
    if [ $up = 0 ]; then
        note=""
        [ $allowed -gt 0 ] && note=" ($allowed known exception(s))"
        ok "$layer: $down include(s) of lower layers, none of a higher one$note"
    fi
done

for a in "${ALLOW[@]+"${ALLOW[@]}"}"; do
    if [ -n "${seen[$a]:-}" ]; then
        ok "known upward include, still to remove: ${a/ / -> }"
    else
        bad "${a%% *}" "no longer includes ${a#* }: delete that exception from ALLOW in tests/layers.sh and from docs/design.md"
    fi
done

# rooms a reader can hold: files of at most 600 lines, functions of 120
if out=$(python3 tests/room_sizes.py src 2>&1); then ok "src: no file over 600 lines, no function over 120 ($out)"
else bad "src: rooms too large" "$out (split by purpose)"; fi

if [ -n "${1:-}" ]; then
    for dir in src/*/ src/*/*/; do
        dir=${dir%/}
        ls "$1/$dir"/*.o > /dev/null 2>&1 || continue
        if out=$(python3 tests/file_circles.py "$1/$dir" 2>&1); then ok "$dir: no circle among its files ($out uses of one file by another)"
        else bad "$dir" "a circle of files: $out (move what both need below them)"; fi
    done
fi

echo "layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
