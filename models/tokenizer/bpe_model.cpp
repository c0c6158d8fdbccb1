#include "models/tokenizer/bpe_model.h"

#include <queue>
#include <stdexcept>

#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

// A merge waiting in the queue: the pair that starts at symbol `pos`.
struct Candidate {
  uint32_t rank;
  size_t pos;
  int64_t merged;
};

// std::priority_queue pops the largest; "larger" here is the lower rank, then the
// leftmost position.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
  }
};

// One symbol of the pre-token being merged, in a doubly linked list so that a merge
// is O(1); a merged-away symbol is marked dead and stays in place.
struct Symbol {
  int64_t id;
  ptrdiff_t prev;
  ptrdiff_t next;
  bool alive;
};

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int64_t> vocab,
                   const std::vector<BpeMerge>& merges, bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    merges_[pair_key(m.left, m.right)] = MergeTarget{static_cast<uint32_t>(rank), m.merged};
  }
}

std::optional<int64_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> BpeModel::merge_piece(std::string_view piece) const {
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t n = utf8::sequence_length(static_cast<unsigned char>(piece[pos]));
    const std::string character(piece.substr(pos, n));
    auto it = vocab_.find(character);
    if (it == vocab_.end()) {
      throw std::invalid_argument("BPE: character \"" + character +
                                  "\" has no token in the vocabulary");
    }
    const auto index = static_cast<ptrdiff_t>(symbols.size());
    symbols.push_back(Symbol{it->second, index - 1, index + 1, true});
    pos += n;
  }
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto push_pair = [&](ptrdiff_t left) {
    const ptrdiff_t right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) {
      queue.push(Candidate{it->second.rank, static_cast<size_t>(left), it->second.merged});
    }
  };
  for (ptrdiff_t i = 0; i + 1 < static_cast<ptrdiff_t>(symbols.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    // Entries go stale when a neighbour merged after they were queued: the symbol died,
    // lost its right neighbour, or now forms another pair (whose merged token differs,
    // since symbols only grow).
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.merged != top.merged) continue;

    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = static_cast<ptrdiff_t>(top.pos);
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(static_cast<ptrdiff_t>(top.pos));
  }

  std::vector<int64_t> ids;
  for (ptrdiff_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

void BpeModel::tokenize(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(piece)) {
      ids.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCacheMaxBytes;
  std::string key;
  if (cacheable) {
    key.assign(piece);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> merged = merge_piece(piece);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheEntries) cache_.emplace(std::move(key), std::move(merged));
  }
}

}  // namespace sb
