#!/usr/bin/python3
"""Counts a PNG's pixels: those that differ from the background (its top-left
pixel) and those near each colour asked for. Standard library only (zlib +
struct): 8-bit greyscale, RGB or RGBA, not interlaced, as Chromium writes.

usage: png_colours.py FILE.png [--min-ink F] [#rrggbb:MIN ...]
  --min-ink F      at least a fraction F of the pixels differ from the
                   background (default 0.01); 0 with --blank: none may
  --blank          the picture must be blank (every pixel the background)
  #rrggbb:MIN      at least MIN pixels within 40 (per channel) of the colour
Exit 0 when every condition holds, 1 otherwise, 2 for a file it cannot read.
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            raise ValueError("bad CRC in a %s chunk" % kind.decode("latin-1"))
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise ValueError("unsupported PNG (depth %d, colour type %d, interlace %d)" % (depth, colour, interlace))
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        n = channels
        # One loop per filter type (PNG spec, section 9.2): filters 1, 3 and 4
        # depend on the bytes just decoded, so they go byte by byte.
        if f == 1:
            for i in range(n, stride):
                line[i] = (line[i] + line[i - n]) & 255
        elif f == 2:
            line = bytearray((x + u) & 255 for x, u in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - n] if i >= n else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - n] if i >= n else 0
                b = prev[i]
                c = prev[i - n] if i >= n else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif f != 0:
            raise ValueError("bad filter %d on row %d" % (f, y))
        rows.append(bytes(line))
        prev = line
    if channels == 1:
        pixels = [(v, v, v) for r in rows for v in r]
    else:
        pixels = [tuple(r[i:i + 3]) for r in rows for i in range(0, stride, channels)]
    return width, height, pixels


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    path, min_ink, blank, colours = args[0], 0.01, False, []
    i = 1
    while i < len(args):
        if args[i] == "--min-ink":
            min_ink = float(args[i + 1])
            i += 1
        elif args[i] == "--blank":
            blank = True
        else:
            hexcode, count = args[i].split(":")
            colours.append((tuple(int(hexcode[k:k + 2], 16) for k in (1, 3, 5)), int(count)))
        i += 1
    try:
        width, height, pixels = read_png(path)
    except (OSError, ValueError, zlib.error, struct.error, TypeError) as e:
        print("%s: %s" % (path, e))
        return 2
    background = pixels[0]
    ink = sum(1 for p in pixels if p != background)
    ok = True
    report = ["%s: %d x %d, %d of %d pixels differ from the background %s" % (path, width, height, ink, len(pixels),
                                                                               "#%02x%02x%02x" % background)]
    if blank:
        ok = ink == 0
    elif ink < min_ink * len(pixels):
        ok = False
        report.append("  too few: at least %.1f%% expected" % (100 * min_ink))
    for rgb, need in colours:
        n = sum(1 for p in pixels if all(abs(p[k] - rgb[k]) <= 40 for k in range(3)))
        report.append("  #%02x%02x%02x: %d pixels (at least %d expected)" % (rgb + (n, need)))
        ok = ok and n >= need
    print("\n".join(report))
    return 0 if ok else 1


sys.exit(main())
