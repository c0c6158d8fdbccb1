#pragma once
// Unicode normalization form C, the normalizer of Qwen2's tokenizer.json, computed the
// way HF tokenizers computes it.
//
// HF's NFC (the unicode-normalization-alignments crate) carries Unicode 9.0 data: to it,
// a character assigned later (Unicode 10.0 on) has combining class 0 and takes part in
// no decomposition or composition. So HF leaves such characters where they are, and
// they stop reordering and composition around them: "\u0301\u1DF9" stays as is (ICU,
// knowing U+1DF9's class 220, would swap the two), and U+11935 U+11930 stays two
// characters (Unicode 13.0 composes them). Here ICU's NFC runs on the stretches between
// such characters, which are copied unchanged; that is exact, since nothing reorders or
// composes across a class-0 character that composes with nothing.

#include <string>
#include <string_view>

namespace sb {

// NFC (as HF tokenizers computes it) of well-formed UTF-8 text. Throws
// std::runtime_error if ICU fails.
std::string nfc_normalize(std::string_view text);

}  // namespace sb
