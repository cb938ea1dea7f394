# Sourced by the GPU bench scripts (bench/*_check.sh and the others that run kbench on a GPU machine): makes the
# `landlock` package importable from .device/site, which their PYTHONPATH names, on a machine that reaches no
# package index. The wheel comes from the folder $LANDLOCK_WHEELS, carried with the call (default: shared/wheels,
# then ../shared/wheels: the project keeps its copy in ../shared/wheels/). Without it the runners run
# unconfined, and each evaluation's log says `writes not confined`. Usage: landlock_site REPOSITORY_ROOT
landlock_site() {
    local root=$1 folder wheel
    PYTHONPATH=$root/.device/site python3 -c "import landlock" 2>/dev/null && return 0
    for folder in ${LANDLOCK_WHEELS:-$root/shared/wheels $root/../shared/wheels}; do
        for wheel in "$folder"/landlock-*.whl; do
            [ -f "$wheel" ] && python3 -m pip install -q --root-user-action=ignore --no-index --no-deps --no-compile \
                --target "$root/.device/site" "$wheel" && return 0
        done
    done
    echo "bench: no landlock wheel in ${LANDLOCK_WHEELS:-shared/wheels or ../shared/wheels}: the runners run unconfined" >&2
}
