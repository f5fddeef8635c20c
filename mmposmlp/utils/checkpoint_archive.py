"""The archive around a checkpoint's pickles, checked before torch reads a byte.

torch reads a zip archive (``data.pkl`` and one record per storage) or, for files older than torch 1.6, five
pickles in a row; a tar archive (torch < 0.4) it unpacks to disk. :func:`pickles_in` yields the pickles
torch will unpickle, after refusing the layouts that torch's reader and :mod:`zipfile` could read differently.
"""
import io
import struct
import tarfile
import zipfile


class Refused(Exception):
    """What a file asks for that a data-only load refuses (a phrase: ``'a tar archive (...)'``)."""


class _Bounded:
    """A file whose reads never ask for more than what is left (pickletools reads an opcode's declared length)."""

    def __init__(self, f, end):
        self.f, self.end = f, end

    def read(self, n):
        return self.f.read(max(0, min(n, self.end - self.f.tell())))

    def readline(self):
        return self.f.readline(max(0, self.end - self.f.tell()))


def _offsets_as_written(f, z, size) -> bool:
    """zipfile shifts every offset when the central directory does not end where the end records say (data
    put before an archive); torch's reader does not, so the two would read different records."""
    end = size - 22 - len(z.comment)
    f.seek(end - 76)
    zip64, locator, record = (lambda b: (b[:56], b[56:76], b[76:]))(f.read(98))
    found = [struct.unpack('<II', record[12:20])]  # (size, offset) of the central directory
    if locator[:4] == b'PK\x06\x07':  # a zip64 end record, where zipfile expects it
        end -= 76
        if struct.unpack('<Q', locator[8:16])[0] != end or zip64[:4] != b'PK\x06\x06':
            return False
        found.append(struct.unpack('<QQ', zip64[40:56]))
    return all(cd_size + cd_offset == end or 0xFFFFFFFF in (cd_size, cd_offset) for cd_size, cd_offset in found)


def _data_pickle(f, size) -> bytes:
    """The ``data.pkl`` torch reads from a zip checkpoint, after checking the archive."""
    with zipfile.ZipFile(f) as z:
        infos = z.infolist()
        names = [i.filename for i in infos]
        top = names[0].split('/')[0] + '/' if names else '/'
        if any(n.endswith('constants.pkl') for n in names):
            raise Refused('TorchScript code (a torch.jit archive; load it with torch.jit.load if you trust it)')
        if len(set(names)) != len(names) or not all(n.startswith(top) for n in names):
            raise Refused('archive records named twice or outside the archive folder')
        if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or sum(i.file_size for i in infos) > size:
            raise Refused('archive records that are compressed or larger than the file')
        if not _offsets_as_written(f, z, size):
            raise Refused('a zip central directory away from where its end record puts it')
        return z.read(top + 'data.pkl')


def pickles_in(f, size):
    """The pickles ``torch.load`` will read from ``f`` (an open file of ``size`` bytes at offset 0), each a file
    to read one pickle from."""
    if f.read(4) == b'PK\x03\x04':  # torch's own test for a zip checkpoint
        yield io.BytesIO(_data_pickle(f, size))
        return
    f.seek(0)
    if tarfile.is_tarfile(f):
        raise Refused('a tar archive (the torch < 0.4 format, which torch.load unpacks to disk)')
    f.seek(0)
    for _ in range(5):  # the legacy format: magic number, protocol, system info, the data, the storage keys
        yield _Bounded(f, size)
