# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
"""Read a TVM wheel and write a modified copy of it.

A wheel is a zip archive (PEP 427).  :class:`WheelReader` gives its metadata
and files; :func:`write_wheel` writes a new wheel in which some files are
replaced, added or removed, the ``.dist-info`` (and ``.data``) directory is
renamed for a new version, ``METADATA`` carries that version and ``RECORD`` is
rebuilt with the SHA-256 digest and size of every file.

Unchanged members are copied byte for byte (their compressed data is not
re-compressed: the TVM wheels hold a 260 MB shared library), and every new
member gets fixed attributes, so the same input always gives the same output.
"""

import base64
import csv
import hashlib
import io
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Tuple

# Members never extracted as text: compiled libraries and byte code.
BINARY_SUFFIXES = (".so", ".dylib", ".dll", ".a", ".pyc", ".pyd")
# PEP 440 version, as found in wheel METADATA (case-insensitive).
VERSION_RE = re.compile(
    r"^(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
    r"(?P<pre>(?:a|b|rc)\d+)?(?P<post>\.post\d+)?(?P<dev>\.dev\d+)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:\.[a-z0-9]+)*))?$",
    re.IGNORECASE,
)
_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_CENTRAL_HEADER = struct.Struct("<IHHHHHHIIIHHHHHII")
_END_RECORD = struct.Struct("<IHHHHIIH")
_ZIP32_LIMIT = 0xFFFFFFFF


class WheelError(Exception):
    """A wheel this tool cannot read or rewrite, with the reason."""


def is_binary_member(name: str) -> bool:
    """Whether a wheel member is a compiled file (never patched, never extracted)."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(BINARY_SUFFIXES) or ".so." in base or "/__pycache__/" in name


def parse_version(version: str) -> Dict[str, Optional[str]]:
    """The parts of a PEP 440 version; raises WheelError when it is not one."""
    match = VERSION_RE.match(version.strip())
    if not match:
        raise WheelError(f"{version!r} is not a PEP 440 version")
    return match.groupdict()


def record_digest(data: bytes) -> str:
    """The ``sha256=...`` field of a RECORD row."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass
class NewMember:
    """Content for a wheel member that is added or replaced."""

    data: bytes
    executable: bool = False


class WheelReader:
    """The metadata and members of a wheel file.

    Parameters
    ----------
    path : Path
        The ``.whl`` file.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise WheelError(f"{self.path}: no such file")
        try:
            self.archive = zipfile.ZipFile(self.path)
        except zipfile.BadZipFile as err:
            raise WheelError(f"{self.path}: not a wheel (not a zip archive: {err})") from err
        self.infos = self.archive.infolist()
        self.names = {info.filename for info in self.infos}
        dist_infos = sorted(
            {
                name.split("/", 1)[0]
                for name in self.names
                if re.fullmatch(r"[^/]+\.dist-info/METADATA", name)
            }
        )
        if len(dist_infos) != 1:
            raise WheelError(
                f"{self.path.name}: not a wheel: expected one top-level *.dist-info/METADATA, "
                f"found {len(dist_infos)}"
            )
        self.dist_info = dist_infos[0]
        self.dist_name, _, dir_version = self.dist_info[: -len(".dist-info")].rpartition("-")
        headers = HeaderParser().parsestr(self.read_text(f"{self.dist_info}/METADATA"))
        self.name = headers.get("Name", "")
        self.version = headers.get("Version", "")
        if not self.name or not self.version:
            raise WheelError(f"{self.path.name}: its METADATA has no Name or no Version")
        if dir_version != self.version:
            raise WheelError(
                f"{self.path.name}: its {self.dist_info} does not match METADATA Version "
                f"{self.version}"
            )
        parse_version(self.version)
        wheel_file = f"{self.dist_info}/WHEEL"
        self.tags: List[str] = []
        if wheel_file in self.names:
            self.tags = HeaderParser().parsestr(self.read_text(wheel_file)).get_all("Tag") or []

    def close(self) -> None:
        """Close the archive."""
        self.archive.close()

    def __enter__(self) -> "WheelReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self, name: str) -> bytes:
        """The content of a member."""
        return self.archive.read(name)

    def read_text(self, name: str) -> str:
        """The content of a text member."""
        return self.read(name).decode("utf-8")

    def has_package(self, package: str) -> bool:
        """Whether the wheel holds the top-level package ``package`` (``package/__init__.py``)."""
        return f"{package}/__init__.py" in self.names

    def extract_text(self, prefix: str, destination: Path) -> List[str]:
        """Extract the members under ``prefix`` that are not compiled files.

        Returns
        -------
        names : List[str]
            The member names extracted, relative to the wheel root.
        """
        extracted = []
        for info in self.infos:
            if info.is_dir() or not info.filename.startswith(prefix):
                continue
            if is_binary_member(info.filename):
                continue
            if ".." in info.filename.split("/") or info.filename.startswith("/"):
                raise WheelError(f"{self.path.name}: unsafe member name {info.filename!r}")
            target = destination / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.archive.read(info))
            extracted.append(info.filename)
        return extracted

    def file_tags(self) -> str:
        """The compressed tag set of the wheel's file name, e.g. ``py3-none-manylinux_2_28_x86_64``."""
        if self.tags:
            parts: Tuple[List[str], List[str], List[str]] = ([], [], [])
            for tag in self.tags:
                fields = tag.strip().split("-")
                if len(fields) != 3:
                    raise WheelError(f"{self.path.name}: malformed WHEEL Tag {tag!r}")
                for values, value in zip(parts, fields):
                    if value not in values:
                        values.append(value)
            return "-".join(".".join(values) for values in parts)
        fields = self.path.name[: -len(".whl")].split("-")
        if len(fields) not in (5, 6):
            raise WheelError(f"{self.path.name}: no WHEEL Tag lines and no tags in the file name")
        return "-".join(fields[-3:])

    def raw_member(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The stored (compressed) bytes of a member, in chunks."""
        with open(self.path, "rb") as stream:
            stream.seek(info.header_offset)
            header = stream.read(_LOCAL_HEADER.size)
            fields = _LOCAL_HEADER.unpack(header)
            if fields[0] != 0x04034B50:
                raise WheelError(f"{self.path.name}: corrupt local header of {info.filename}")
            stream.seek(fields[9] + fields[10], io.SEEK_CUR)
            remaining = info.compress_size
            while remaining:
                chunk = stream.read(min(remaining, 1 << 22))
                if not chunk:
                    raise WheelError(f"{self.path.name}: {info.filename} is truncated")
                remaining -= len(chunk)
                yield chunk

    def member_digest(self, info: zipfile.ZipInfo) -> Tuple[str, int]:
        """The RECORD digest and size of a member's uncompressed content."""
        digest = hashlib.sha256()
        size = 0
        with self.archive.open(info) as stream:
            while True:
                chunk = stream.read(1 << 22)
                if not chunk:
                    break
                digest.update(chunk)
                size += len(chunk)
        encoded = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
        return "sha256=" + encoded, size


class _ZipWriter:
    """A minimal, deterministic zip writer (no zip64, no data descriptors)."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.central: List[bytes] = []

    @staticmethod
    def _dos_time(date_time: Tuple[int, ...]) -> Tuple[int, int]:
        year, month, day, hour, minute, second = date_time[:6]
        year = min(max(year, 1980), 2107)
        return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (
            month << 5
        ) | day

    def add(
        self,
        name: str,
        method: int,
        crc: int,
        compressed_size: int,
        size: int,
        date_time: Tuple[int, ...],
        external_attr: int,
        chunks,
    ) -> None:
        """Write one member whose (already compressed) data is ``chunks``."""
        offset = self.stream.tell()
        if max(offset, compressed_size, size) >= _ZIP32_LIMIT:
            raise WheelError(f"{name}: the wheel needs zip64, which this tool does not write")
        encoded = name.encode("utf-8")
        flags = 0 if name.isascii() else 0x800
        dos_time, dos_date = self._dos_time(date_time)
        self.stream.write(
            _LOCAL_HEADER.pack(
                0x04034B50,
                20,
                flags,
                method,
                dos_time,
                dos_date,
                crc,
                compressed_size,
                size,
                len(encoded),
                0,
            )
        )
        self.stream.write(encoded)
        written = 0
        for chunk in chunks:
            self.stream.write(chunk)
            written += len(chunk)
        if written != compressed_size:
            raise WheelError(f"{name}: wrote {written} bytes, expected {compressed_size}")
        self.central.append(
            _CENTRAL_HEADER.pack(
                0x02014B50,
                (3 << 8) | 20,
                20,
                flags,
                method,
                dos_time,
                dos_date,
                crc,
                compressed_size,
                size,
                len(encoded),
                0,
                0,
                0,
                0,
                external_attr,
                offset,
            )
            + encoded
        )

    def add_bytes(
        self, name: str, data: bytes, date_time: Tuple[int, ...], external_attr: int
    ) -> None:
        """Write one member from its uncompressed content (deflated)."""
        if name.endswith("/"):
            self.add(name, zipfile.ZIP_STORED, 0, 0, 0, date_time, external_attr, [])
            return
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        packed = compressor.compress(data) + compressor.flush()
        self.add(
            name,
            zipfile.ZIP_DEFLATED,
            zlib.crc32(data),
            len(packed),
            len(data),
            date_time,
            external_attr,
            [packed],
        )

    def close(self) -> None:
        """Write the central directory."""
        start = self.stream.tell()
        for entry in self.central:
            self.stream.write(entry)
        size = self.stream.tell() - start
        if len(self.central) >= 0xFFFF or start >= _ZIP32_LIMIT:
            raise WheelError("the wheel needs zip64, which this tool does not write")
        count = len(self.central)
        self.stream.write(_END_RECORD.pack(0x06054B50, 0, 0, count, count, size, start, 0))


def set_metadata_version(metadata: str, version: str) -> str:
    """``METADATA`` text with its ``Version`` header set to ``version``."""
    header, separator, body = metadata.partition("\n\n")
    new_header, count = re.subn(
        r"^Version:[ \t]*\S+[ \t]*$", f"Version: {version}", header, count=1, flags=re.MULTILINE
    )
    if count != 1:
        raise WheelError("METADATA has no Version header")
    return new_header + separator + body


def write_wheel(
    reader: WheelReader,
    stream: BinaryIO,
    version: str,
    members: Dict[str, Optional[NewMember]],
) -> None:
    """Write a copy of ``reader``'s wheel with a new version and changed members.

    Parameters
    ----------
    reader : WheelReader
        The input wheel.
    stream : BinaryIO
        Where the new wheel is written (a file opened for binary writing).
    version : str
        The version of the new wheel.
    members : Dict[str, Optional[NewMember]]
        Member name (in the input's naming) -> new content, or None to remove
        it.  Names not in the input are added, before the ``.dist-info``
        members, in name order.
    """
    old_prefixes = (f"{reader.dist_info}/", f"{reader.dist_info[: -len('.dist-info')]}.data/")
    new_dist_info = f"{reader.dist_name}-{version}.dist-info"
    new_prefixes = (f"{new_dist_info}/", f"{reader.dist_name}-{version}.data/")
    record_name = f"{reader.dist_info}/RECORD"
    dropped = {
        f"{reader.dist_info}/RECORD.jws",  # signatures of the old RECORD: no longer valid
        f"{reader.dist_info}/RECORD.p7s",
    }

    def renamed(name: str) -> str:
        for old, new in zip(old_prefixes, new_prefixes):
            if name.startswith(old):
                return new + name[len(old) :]
        return name

    metadata_name = f"{reader.dist_info}/METADATA"
    metadata_info = reader.archive.getinfo(metadata_name)
    changes = dict(members)
    changes[metadata_name] = NewMember(
        set_metadata_version(reader.read_text(metadata_name), version).encode("utf-8")
    )
    added = sorted(
        name for name in changes if name not in reader.names and changes[name] is not None
    )
    writer = _ZipWriter(stream)
    rows: List[Tuple[str, str, str]] = []

    def write_new(name: str, member: NewMember, info: Optional[zipfile.ZipInfo]) -> None:
        if info is not None:
            date_time, attr = info.date_time, info.external_attr
        else:
            mode = 0o100755 if member.executable else 0o100644
            date_time, attr = metadata_info.date_time, mode << 16
        writer.add_bytes(renamed(name), member.data, date_time, attr)
        rows.append((renamed(name), record_digest(member.data), str(len(member.data))))

    pending_added = True
    record_info = None
    for info in reader.infos:
        name = info.filename
        if pending_added and name.startswith(old_prefixes):
            for new_name in added:
                write_new(new_name, changes[new_name], None)
            pending_added = False
        if name in dropped:
            continue
        if name == record_name:
            record_info = info
            continue
        if name in changes:
            if changes[name] is not None:
                write_new(name, changes[name], info)
            continue
        if info.is_dir():
            writer.add(
                renamed(name), info.compress_type, 0, 0, 0, info.date_time, info.external_attr, []
            )
            continue
        digest, size = reader.member_digest(info)
        writer.add(
            renamed(name),
            info.compress_type,
            info.CRC,
            info.compress_size,
            info.file_size,
            info.date_time,
            info.external_attr,
            reader.raw_member(info),
        )
        rows.append((renamed(name), digest, str(size)))
    if pending_added:
        for new_name in added:
            write_new(new_name, changes[new_name], None)
    record_path = f"{new_dist_info}/RECORD"
    text = io.StringIO()
    csv_writer = csv.writer(text, lineterminator="\n")
    for row in rows:
        csv_writer.writerow(row)
    csv_writer.writerow((record_path, "", ""))
    date_time = record_info.date_time if record_info else metadata_info.date_time
    attr = record_info.external_attr if record_info else 0o100644 << 16
    writer.add_bytes(record_path, text.getvalue().encode("utf-8"), date_time, attr)
    writer.close()
