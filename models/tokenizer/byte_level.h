#pragma once
// GPT-2's reversible map from bytes to printable Unicode characters, which byte-level
// BPE vocabularies (GPT-2, Qwen2) are written in: a token is a string of these
// characters, one per byte, so that any byte sequence has a spelling without spaces or
// control characters.
//
// The printable bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to the code point of the
// same value; the other 68 bytes (0x00-0x20, 0x7F-0xA0, 0xAD), in increasing order,
// map to U+0100, U+0101, ... U+0143. So ' ' (0x20) is 'Ġ' (U+0120) and '\n' is 'Ċ'.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace sb {

// byte -> code point, for all 256 bytes.
const std::array<char32_t, 256>& byte_level_code_points();

// code point -> byte, or -1 for a code point that no byte maps to.
int byte_level_byte(char32_t code_point);

// The byte-level spelling of some bytes: each byte replaced by its character (UTF-8).
std::string byte_level_encode(std::string_view bytes);

// The bytes a token spells when every one of its characters is in the table; nullopt
// otherwise (HF's ByteLevel decoder then keeps the token's own UTF-8, which is how
// added tokens such as "<|im_end|>" or a token containing a real space decode).
// The token must be well-formed UTF-8.
std::optional<std::string> byte_level_decode(std::string_view token);

}  // namespace sb
