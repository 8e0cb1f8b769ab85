"""HTTP/2 frames and HPACK blocks built by hand (RFC 9113 §4, RFC 7541),
for the hostile test peers (h2_hostile_client.py, h2_hostile_origin.py):
shapes a well-behaved library refuses to produce.
"""

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
# Header blocks are cut into frames of at most this many bytes.
CHUNK = 16000


# --- Frames and HPACK by hand ------------------------------------------------

def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + (stream & 0x7FFFFFFF).to_bytes(4, "big") + payload


def integer(value, prefix_bits, first=0):
    """RFC 7541 §5.1: `first` carries the pattern bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(data):
    data = data.encode() if isinstance(data, str) else data
    return integer(len(data), 7) + data


def indexed(index):
    return integer(index, 7, 0x80)


def literal(name, value, indexing=False):
    """A literal with a new name: incremental indexing (0x40) or not (0x00)."""
    return (b"\x40" if indexing else b"\x00") + string(name) + string(value)


def literal_name_index(index, value):
    """A literal without indexing whose name is static-table entry `index`."""
    return integer(index, 4, 0x00) + string(value)


def request_block(method, host, path):
    """Pseudo-headers by static index (nothing enters the dynamic table)."""
    block = indexed({"GET": 2, "POST": 3}[method]) + indexed(7)  # :scheme https
    block += indexed(4) if path == "/" else literal_name_index(4, path)
    return block + literal_name_index(1, host)  # :authority


def header_frames(stream, block, end_stream, chunk):
    """HEADERS (+ CONTINUATION) frames carrying `block`, each <= chunk."""
    pieces = [block[i:i + chunk] for i in range(0, len(block), chunk)] or [b""]
    out = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        if i == 0:
            flags = (END_STREAM if end_stream else 0) | (END_HEADERS if last else 0)
            out.append(frame(HEADERS, flags, stream, piece))
        else:
            out.append(frame(CONTINUATION, END_HEADERS if last else 0, stream, piece))
    return b"".join(out)


def settings_frame(values):
    return frame(SETTINGS, 0, 0, b"".join(k.to_bytes(2, "big") + v.to_bytes(4, "big") for k, v in values))


# --- Connection --------------------------------------------------------------
