"""Plays the attacker of a shared compile cache: copies the one code object
of cache FROM (every file of its entry: NAME.o and whatever the cache keeps
beside it) over every code object of cache TO, under TO's names, so that
each key of TO leads to FROM's code. Prints "planted: N" (the entries of TO
replaced)."""

import os
import shutil
import sys


def entries(cache):
    """The files of each entry of CACHE/objects, by the entry's name (a
    file name up to its first dot)."""
    folder = os.path.join(cache, "objects")
    found = {}
    for name in sorted(os.listdir(folder)):
        found.setdefault(name.split(".", 1)[0], []).append(name)
    return folder, found


def main():
    source, target = sys.argv[1:3]
    source_folder, source_entries = entries(source)
    if len(source_entries) != 1:
        sys.exit("%s holds %d entries, not one" % (source, len(source_entries)))
    [(source_name, source_files)] = source_entries.items()
    target_folder, target_entries = entries(target)
    for name in target_entries:
        for file in source_files:
            shutil.copyfile(os.path.join(source_folder, file),
                            os.path.join(target_folder,
                                         name + file[len(source_name):]))
    print("planted: %d" % len(target_entries))


if __name__ == "__main__":
    main()
