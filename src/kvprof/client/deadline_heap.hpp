// A binary min-heap of deadlines with O(log n) update and removal, for the raw transport's
// per-request timeouts. T has members `int64_t deadline_ns` and `size_t heap_index`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kvprof::client {

template <class T>
class DeadlineHeap {
 public:
  static constexpr size_t k_absent = std::numeric_limits<size_t>::max();

  [[nodiscard]] bool empty() const { return m_items.empty(); }
  [[nodiscard]] size_t size() const { return m_items.size(); }
  // The item with the earliest deadline; nullptr when empty.
  [[nodiscard]] T* top() const { return m_items.empty() ? nullptr : m_items.front(); }

  // Sets `item`'s deadline, adding it when it is not in the heap.
  void set(T* item, int64_t deadline_ns) {
    item->deadline_ns = deadline_ns;
    if (item->heap_index == k_absent) {
      item->heap_index = m_items.size();
      m_items.push_back(item);
      sift_up(item->heap_index);
    } else {
      sift_up(item->heap_index);
      sift_down(item->heap_index);
    }
  }

  // Takes `item` out; nothing when it is not in the heap.
  void remove(T* item) {
    const size_t i = item->heap_index;
    if (i == k_absent) return;
    item->heap_index = k_absent;
    T* last = m_items.back();
    m_items.pop_back();
    if (i == m_items.size()) return;
    place(i, last);
    sift_up(i);
    sift_down(last->heap_index);
  }

 private:
  void place(size_t i, T* item) {
    m_items[i] = item;
    item->heap_index = i;
  }
  void sift_up(size_t i) {
    T* item = m_items[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (m_items[parent]->deadline_ns <= item->deadline_ns) break;
      place(i, m_items[parent]);
      i = parent;
    }
    place(i, item);
  }
  void sift_down(size_t i) {
    T* item = m_items[i];
    const size_t n = m_items.size();
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && m_items[child + 1]->deadline_ns < m_items[child]->deadline_ns) ++child;
      if (item->deadline_ns <= m_items[child]->deadline_ns) break;
      place(i, m_items[child]);
      i = child;
    }
    place(i, item);
  }

  std::vector<T*> m_items;
};

}  // namespace kvprof::client
