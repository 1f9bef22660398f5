#!/usr/bin/env bash
# sim-fenced: a seeded gc-pauses run in which a member pauses past its
# session, is expelled while alive, and wakes up still writing under its
# old token: the fence rejects those writes, an unfenced copy of the
# resource takes them. The timeline is of a partition that member held.
. "$(dirname "$0")/lib.sh"

run 'bin/tenure sim --scenario gc-pauses --seed 1 --partition 23'
