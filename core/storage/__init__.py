"""Storage: every path the factory reads or writes, a local path or any fsspec URL.

Local paths (and file:// URLs) go through the operating system: parent folders are created, and a
whole-file write goes to a temporary name that is renamed into place, so a reader never sees half a
file. URLs (gs://, s3://, memory://, ...) go through fsspec. An object store has no folders and no
rename: a folder is a prefix, an object appears whole when its upload ends, and a rename is a copy
then a delete. The layers above never need more than that. A stage folder is finished when its
manifest.json exists (written last), a checkpoint when its checksums.json exists (written last).

Listings are never cached: another process (the trainer, a Beam worker) may have written since.

This is the one package that touches user-given paths; everything else calls it, as
`from core import storage; storage.read_json(path)`. Modules: paths (names, and the
fsspec filesystem of a URL), files (querying, reading and writing single files), folders (folders
that appear whole, folder transfers, local stand-ins for remote files and folders, and local places
to write big files at that end up whole at a path or URL), inputs (inputs read exactly as they
were hashed), policy and gcs (how hard a request to a store tries: timeouts, retries, one line when
it gives up).
"""

from core.storage.files import (
    append_text,
    checksum,
    copy,
    exists,
    glob,
    isdir,
    isfile,
    listdir,
    makedirs,
    match,
    open_read,
    open_write,
    read_bytes,
    read_json,
    read_text,
    remove,
    rename,
    sha256,
    size,
    subdirs,
    write_bytes,
    write_json,
    write_text,
)
from core.storage.folders import (
    Mirror,
    check_writable_folder,
    get_dir,
    local_file,
    local_file_for,
    local_folder_for,
    put_dir,
    staged_folder,
    write_folder,
)
from core.storage.inputs import fingerprint, identity, open_input
from core.storage.paths import (
    absolute,
    basename,
    dirname,
    filesystem,
    has_glob,
    is_url,
    join,
    local_path,
    protocol,
)

__all__ = [
    "Mirror",
    "absolute",
    "append_text",
    "basename",
    "check_writable_folder",
    "checksum",
    "copy",
    "dirname",
    "exists",
    "filesystem",
    "fingerprint",
    "get_dir",
    "glob",
    "has_glob",
    "identity",
    "is_url",
    "isdir",
    "isfile",
    "join",
    "listdir",
    "local_file",
    "local_file_for",
    "local_folder_for",
    "local_path",
    "makedirs",
    "match",
    "open_input",
    "open_read",
    "open_write",
    "protocol",
    "put_dir",
    "read_bytes",
    "read_json",
    "read_text",
    "remove",
    "rename",
    "sha256",
    "size",
    "staged_folder",
    "subdirs",
    "write_bytes",
    "write_folder",
    "write_json",
    "write_text",
]
