# Sourced by the scripts that build and run Server/'s products, after `cd` to Server/: sets build_flags, the
# `swift build` flags every build of theirs and `--show-bin-path` take. CONFIGURATION (default debug) picks
# debug or release; SANITIZE=thread builds with ThreadSanitizer into .build/tsan, the build .ci/run makes
# for the Server suites, so a soak in the gate reuses that build and runs its processes under the sanitizer
# (TSAN_OPTIONS as the caller sets it: the gate's stops a process at its first report).
configuration=${CONFIGURATION:-debug}
build_flags=(-c "$configuration")
if [ "${SANITIZE:-}" = thread ]; then build_flags+=(--sanitize=thread --scratch-path .build/tsan); fi
