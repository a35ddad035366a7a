// CPU kernel of knn: per query row of y, the k nearest rows of x in its example, by a
// KD-tree per example (median splits on the widest coordinate, leaves scanned a coordinate
// at a time over contiguous points, so the loop over points vectorises). A distance is the
// sum over the coordinates, in order, of the squared differences in double, as the
// pure-torch twin computes it, and candidates rank by (class, distance, index): finite
// distances, then infinite ones, then NaN. Points with a coordinate that is not finite stay
// out of the tree and are scanned for every query; a query with one scans every point (the
// tree's bounds would not hold for it). With a finite `within` (radius search), only finite
// distances below it are taken.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace graphloc {
namespace {

constexpr int64_t kLeafSize = 32;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Candidate {
  int cls;  // 0 finite, 1 infinite, 2 NaN
  double dist;
  int64_t index;
};

inline bool closer(const Candidate& a, const Candidate& b) {
  if (a.cls != b.cls) return a.cls < b.cls;
  if (a.cls < 2 && a.dist != b.dist) return a.dist < b.dist;  // (NaN: by index alone)
  return a.index < b.index;
}

inline Candidate candidate(double dist, int64_t index) {
  const int cls = std::isnan(dist) ? 2 : (std::isinf(dist) ? 1 : 0);
  return {cls, dist, index};
}

// The k closest candidates seen so far: a max-heap under `closer` (the worst on top).
class Nearest {
 public:
  Nearest(int64_t k, double within) : k_(k), within_(within) {
    heap_.reserve(std::min<int64_t>(k, 64));
  }
  void offer(const Candidate& c) {
    if (!(c.cls == 0 && c.dist < within_) && within_ < kInf) return;
    if (static_cast<int64_t>(heap_.size()) < k_) {
      heap_.push_back(c);
      std::push_heap(heap_.begin(), heap_.end(), closer);
    } else if (closer(c, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), closer);
      heap_.back() = c;
      std::push_heap(heap_.begin(), heap_.end(), closer);
    }
  }
  // Whether a point at squared distance >= bound along one axis could still enter: a bound
  // equal to the worst distance could still win on its index.
  bool may_enter(double bound) const {
    if (!(bound < within_) && within_ < kInf) return false;
    if (static_cast<int64_t>(heap_.size()) < k_) return true;
    const Candidate& worst = heap_.front();
    return worst.cls > 0 || bound <= worst.dist;
  }
  void write(int64_t* out) {
    std::sort_heap(heap_.begin(), heap_.end(), closer);
    for (size_t r = 0; r < heap_.size(); ++r) out[r] = heap_[r].index;
  }

 private:
  int64_t k_;
  double within_;
  std::vector<Candidate> heap_;
};

struct Node {
  int64_t lo, hi;    // the node's points: tree positions [lo, hi)
  int64_t dim = -1;  // -1 for a leaf
  double split = 0;
  int64_t left = -1, right = -1;
};

// One example's tree: its finite points permuted into tree order, stored coordinate-major
// (coords[f * n + p]), and the rest of its points as a list.
class Tree {
 public:
  Tree(const double* x, int64_t features, int64_t begin, int64_t end) : f_(features) {
    for (int64_t i = begin; i < end; ++i) {
      bool finite = true;
      for (int64_t f = 0; f < f_; ++f) finite = finite && std::isfinite(x[i * f_ + f]);
      (finite ? order_ : others_).push_back(i);
    }
    n_ = static_cast<int64_t>(order_.size());
    if (n_ > 0) build(x, 0, n_);
    coords_.resize(n_ * f_);
    for (int64_t p = 0; p < n_; ++p)
      for (int64_t f = 0; f < f_; ++f) coords_[f * n_ + p] = x[order_[p] * f_ + f];
  }

  void search(const double* x, const double* query, int64_t self, Nearest& nearest,
              std::vector<double>& scratch) const {
    bool finite = true;
    for (int64_t f = 0; f < f_; ++f) finite = finite && std::isfinite(query[f]);
    if (n_ > 0) visit(0, query, self, finite, nearest, scratch);
    for (int64_t i : others_) {
      if (i == self) continue;
      double d = 0;
      for (int64_t f = 0; f < f_; ++f) {
        const double diff = query[f] - x[i * f_ + f];
        d += diff * diff;
      }
      nearest.offer(candidate(d, i));
    }
  }

 private:
  int64_t build(const double* x, int64_t lo, int64_t hi) {
    const int64_t id = static_cast<int64_t>(nodes_.size());
    nodes_.push_back({lo, hi});
    if (hi - lo <= kLeafSize) return id;
    int64_t dim = 0;
    double widest = -1;
    for (int64_t f = 0; f < f_; ++f) {
      double low = std::numeric_limits<double>::infinity(), high = -low;
      for (int64_t p = lo; p < hi; ++p) {
        low = std::min(low, x[order_[p] * f_ + f]);
        high = std::max(high, x[order_[p] * f_ + f]);
      }
      if (high - low > widest) widest = high - low, dim = f;
    }
    if (!(widest > 0)) return id;  // every point equal: one leaf
    const int64_t mid = lo + (hi - lo) / 2;
    std::nth_element(order_.begin() + lo, order_.begin() + mid, order_.begin() + hi,
                     [&](int64_t a, int64_t b) { return x[a * f_ + dim] < x[b * f_ + dim]; });
    const double split = x[order_[mid] * f_ + dim];
    const int64_t left = build(x, lo, mid);
    const int64_t right = build(x, mid, hi);
    Node& node = nodes_[id];
    node.dim = dim, node.split = split, node.left = left, node.right = right;
    return id;
  }

  // Points left of a split have the coordinate <= split, right of it >= split.
  void visit(int64_t id, const double* query, int64_t self, bool finite, Nearest& nearest,
             std::vector<double>& scratch) const {
    const Node& node = nodes_[id];
    if (node.dim < 0) {
      scan(node.lo, node.hi, query, self, nearest, scratch);
      return;
    }
    const double diff = query[node.dim] - node.split;
    const int64_t near = diff < 0 ? node.left : node.right;
    const int64_t far = diff < 0 ? node.right : node.left;
    visit(near, query, self, finite, nearest, scratch);
    if (!finite || nearest.may_enter(diff * diff))
      visit(far, query, self, finite, nearest, scratch);
  }

  // (a leaf of equal points may exceed kLeafSize: scanned kLeafSize points at a time)
  void scan(int64_t lo, int64_t hi, const double* query, int64_t self, Nearest& nearest,
            std::vector<double>& dist) const {
    for (int64_t start = lo; start < hi; start += kLeafSize) {
      const int64_t count = std::min(kLeafSize, hi - start);
      std::fill(dist.begin(), dist.begin() + count, 0.0);
      for (int64_t f = 0; f < f_; ++f) {
        const double q = query[f];
        const double* c = coords_.data() + f * n_ + start;
        for (int64_t p = 0; p < count; ++p) {
          const double diff = q - c[p];
          dist[p] += diff * diff;
        }
      }
      for (int64_t p = 0; p < count; ++p) {
        const int64_t i = order_[start + p];
        if (i != self) nearest.offer(candidate(dist[p], i));
      }
    }
  }

  int64_t f_, n_ = 0;
  std::vector<int64_t> order_, others_;
  std::vector<Node> nodes_;
  std::vector<double> coords_;
};

void check_pointer(const at::Tensor& ptr, const char* name, int64_t rows) {
  TORCH_CHECK(
      ptr.scalar_type() == at::kLong && ptr.dim() == 1 && ptr.numel() >= 1 && ptr.is_contiguous(),
      name, " must be a contiguous 1-D int64 tensor of at least one entry, got ", ptr.scalar_type(),
      " of shape ", ptr.sizes());
  const int64_t* p = ptr.data_ptr<int64_t>();
  TORCH_CHECK(p[0] == 0 && p[ptr.numel() - 1] == rows, name, " must run from 0 to ", rows,
              " (the rows), got ", p[0], " to ", p[ptr.numel() - 1]);
  for (int64_t b = 0; b + 1 < ptr.numel(); ++b)
    TORCH_CHECK(p[b] <= p[b + 1], name, " must not decrease, got ", p[b], " then ", p[b + 1],
                " at ", b);
}

at::Tensor knn_cpu(const at::Tensor& x, const at::Tensor& y, const at::Tensor& ptr_x,
                   const at::Tensor& ptr_y, int64_t k, bool exclude_self, double within) {
  for (const auto* t : {&x, &y})
    TORCH_CHECK(t->scalar_type() == at::kDouble && t->dim() == 2 && t->is_contiguous(),
                "knn: x and y must be contiguous 2-D float64 tensors, got ", t->scalar_type(),
                " of shape ", t->sizes());
  TORCH_CHECK(x.size(1) == y.size(1), "knn: x has ", x.size(1), " features but y has ", y.size(1));
  TORCH_CHECK(k >= 1, "knn: k must be >= 1, got ", k);
  TORCH_CHECK(!std::isnan(within), "knn: within must be a number or inf, got NaN");
  check_pointer(ptr_x, "ptr_x", x.size(0));
  check_pointer(ptr_y, "ptr_y", y.size(0));
  TORCH_CHECK(ptr_x.numel() == ptr_y.numel(), "knn: ptr_x has ", ptr_x.numel() - 1,
              " examples but ptr_y has ", ptr_y.numel() - 1);
  TORCH_CHECK(!exclude_self || x.size(0) == y.size(0), "knn: exclude_self needs x and y to ",
              "be the same rows, got ", x.size(0), " and ", y.size(0));
  auto out = at::full({y.size(0), k}, -1, y.options().dtype(at::kLong));
  const double* xs = x.data_ptr<double>();
  const double* ys = y.data_ptr<double>();
  const int64_t* px = ptr_x.data_ptr<int64_t>();
  const int64_t* py = ptr_y.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t features = x.size(1);
  for (int64_t b = 0; b + 1 < ptr_x.numel(); ++b) {
    if (py[b] == py[b + 1] || px[b] == px[b + 1]) continue;
    const Tree tree(xs, features, px[b], px[b + 1]);
    at::parallel_for(py[b], py[b + 1], 16, [&](int64_t q0, int64_t q1) {
      std::vector<double> scratch(kLeafSize);
      for (int64_t q = q0; q < q1; ++q) {
        Nearest nearest(k, within);
        tree.search(xs, ys + q * features, exclude_self ? q : -1, nearest, scratch);
        nearest.write(o + q * k);
      }
    });
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphloc, CPU, m) { m.impl("knn", &knn_cpu); }

}  // namespace graphloc
