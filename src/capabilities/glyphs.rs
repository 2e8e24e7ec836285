//! The vision probe's image: a number drawn in a built-in 5×7 bitmap font,
//! black on white, scaled up with margins so that a vision model reads it
//! easily, and encoded as a PNG in memory ([`draw`]). The fake provider
//! reads such an image back with the same table ([`read`]), so that what
//! it answers comes from the pixels and not from anything shared with the
//! prober.

use std::io::Cursor;

/// Glyph width and height, in font pixels.
pub const WIDTH: usize = 5;
pub const HEIGHT: usize = 7;
/// Image pixels per font pixel.
pub const SCALE: usize = 10;
/// White space around the digits, in image pixels.
pub const MARGIN: usize = 20;
/// Font pixels of white between two glyphs.
const GAP: usize = 1;

/// The digits 0–9, one row a string, `#` for ink. Every glyph has ink in
/// its top and bottom rows. The zero is plain (no slash or dot), so that
/// no model reads it as a letter.
const DIGITS: [[&str; HEIGHT]; 10] = [
    [
        ".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###.",
    ],
    [
        "..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###.",
    ],
    [
        ".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####",
    ],
    [
        "#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###.",
    ],
    [
        "...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#.",
    ],
    [
        "#####", "#....", "####.", "....#", "....#", "#...#", ".###.",
    ],
    [
        "..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###.",
    ],
    [
        "#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#...",
    ],
    [
        ".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###.",
    ],
    [
        ".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##..",
    ],
];

/// Whether font pixel (`x`, `y`) of `digit` is ink.
fn ink(digit: usize, x: usize, y: usize) -> bool {
    DIGITS[digit][y].as_bytes()[x] == b'#'
}

/// The image's size in pixels for `digits` glyphs.
fn size(digits: usize) -> (usize, usize) {
    let w = 2 * MARGIN + (digits * (WIDTH + GAP) - GAP) * SCALE;
    let h = 2 * MARGIN + HEIGHT * SCALE;
    (w, h)
}

/// A PNG (8-bit greyscale) showing `number` in black on white.
pub fn draw(number: u64) -> Vec<u8> {
    let digits: Vec<usize> = number
        .to_string()
        .bytes()
        .map(|b| usize::from(b - b'0'))
        .collect();
    let (w, h) = size(digits.len());
    let mut pixels = vec![255u8; w * h];
    for (i, &d) in digits.iter().enumerate() {
        let left = MARGIN + i * (WIDTH + GAP) * SCALE;
        for y in 0..HEIGHT * SCALE {
            for x in 0..WIDTH * SCALE {
                if ink(d, x / SCALE, y / SCALE) {
                    pixels[(MARGIN + y) * w + left + x] = 0;
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(Cursor::new(&mut out), w as u32, h as u32);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::High);
    // Writing into memory cannot fail, and the size matches the data.
    let mut writer = enc.write_header().expect("a PNG header written to memory");
    writer
        .write_image_data(&pixels)
        .expect("PNG data of the declared size");
    writer.finish().expect("a PNG finished in memory");
    out
}

/// The number a PNG made by [`draw`] shows, read from its pixels with the
/// same font: `None` when it is not such an image (another size, a pixel
/// that fits no glyph).
pub fn read(png_bytes: &[u8]) -> Option<u64> {
    let mut decoder = png::Decoder::new(Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().ok()?;
    let mut buf = vec![0; reader.output_buffer_size()?];
    let info = reader.next_frame(&mut buf).ok()?;
    let (w, h) = (info.width as usize, info.height as usize);
    let (channels, stride) = (info.color_type.samples(), info.line_size);
    let dark = |x: usize, y: usize| {
        let at = y * stride + x * channels;
        // The first channel is grey or red; black is dark in every one.
        buf.get(at).is_some_and(|v| *v < 128)
    };
    let pitch = (WIDTH + GAP) * SCALE;
    let inner = w.checked_sub(2 * MARGIN)? + GAP * SCALE;
    if h != size(1).1 || !inner.is_multiple_of(pitch) || inner == 0 {
        return None;
    }
    let mut number: u64 = 0;
    for i in 0..inner / pitch {
        let left = MARGIN + i * pitch;
        // The centre of each font pixel decides it.
        let seen =
            |x: usize, y: usize| dark(left + x * SCALE + SCALE / 2, MARGIN + y * SCALE + SCALE / 2);
        let digit = (0..10)
            .find(|&d| (0..HEIGHT).all(|y| (0..WIDTH).all(|x| seen(x, y) == ink(d, x, y))))?;
        number = number.checked_mul(10)?.checked_add(digit as u64)?;
    }
    Some(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_glyph_is_distinct_and_fills_its_rows() {
        for (d, glyph) in DIGITS.iter().enumerate() {
            for row in glyph {
                assert_eq!(row.len(), WIDTH, "{d}");
            }
            assert!(glyph[0].contains('#') && glyph[HEIGHT - 1].contains('#'));
            for (e, other) in DIGITS.iter().enumerate().take(d) {
                assert_ne!(glyph, other, "{d} and {e}");
            }
        }
    }

    #[test]
    fn a_drawn_number_reads_back() {
        for n in [100, 907, 1234, 56789, 99999, 10000] {
            let png = draw(n);
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
            assert_eq!(read(&png), Some(n), "{n}");
        }
    }

    #[test]
    fn images_are_small_and_large_enough_to_read() {
        let png = draw(99999);
        // Five digits: 330 × 110 pixels, a few hundred bytes.
        assert!(png.len() < 2048, "{} bytes", png.len());
        let decoder = png::Decoder::new(Cursor::new(&png));
        let info = decoder.read_info().unwrap().info().clone();
        assert_eq!((info.width, info.height), (330, 110));
    }

    #[test]
    fn anything_else_reads_as_nothing() {
        assert_eq!(read(b"not a png"), None);
        // A blank image of the right size: no glyph is blank.
        let mut png = draw(111);
        let (w, h) = size(3);
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(Cursor::new(&mut out), w as u32, h as u32);
            enc.set_color(png::ColorType::Grayscale);
            let mut wr = enc.write_header().unwrap();
            wr.write_image_data(&vec![255u8; w * h]).unwrap();
        }
        assert_eq!(read(&out), None);
        png.truncate(png.len() / 2);
        assert_eq!(read(&png), None);
    }
}
