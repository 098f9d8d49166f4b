// Index-map composition (see index_map.h). The affine composition of a reshape is the only
// subtle step: the iteration coordinates reach the reshape's output as an affine flat offset
// f = b + sum_j s_j c_j; it stays affine in the input's coordinates exactly when every s_j is a
// multiple of one input dim's stride R_k with s_j / R_k < D_k and, per input dim, the largest
// reachable digit b_k + sum_j (s_j / R_k)(n_j - 1) stays below D_k: then no carry ever crosses
// between dims and u_k = b_k + sum_j (s_j / R_k) c_j.
#include "codegen/index_map.h"

#include <sstream>

namespace opfuse::codegen {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

std::string Transform::key() const {
  std::ostringstream os;
  os << static_cast<int>(kind) << ':' << axis;
  for (const auto* v : {&in_dims, &out_dims, &a, &b}) {
    os << '|';
    for (int64_t x : *v) os << x << ',';
  }
  return os.str();
}

AffineMap AffineMap::identity(size_t rank) {
  AffineMap m;
  m.A.assign(rank, std::vector<int64_t>(rank, 0));
  m.b.assign(rank, 0);
  for (size_t k = 0; k < rank; ++k) m.A[k][k] = 1;
  return m;
}

namespace {

std::optional<AffineMap> reshape_affine(const AffineMap& m, const Transform& t,
                                        const std::vector<int64_t>& iter_dims) {
  const size_t r = iter_dims.size();
  const std::vector<int64_t> os = row_major_strides(t.out_dims);
  std::vector<int64_t> s(r, 0);
  int64_t b0 = 0;
  for (size_t k = 0; k < m.rank(); ++k) {
    b0 += os[k] * m.b[k];
    for (size_t j = 0; j < r; ++j) s[j] += os[k] * m.A[k][j];
  }
  const std::vector<int64_t>& D = t.in_dims;
  const std::vector<int64_t> R = row_major_strides(D);
  AffineMap out;
  out.A.assign(D.size(), std::vector<int64_t>(r, 0));
  out.b.assign(D.size(), 0);
  for (size_t k = 0; k < D.size(); ++k) out.b[k] = D[k] == 0 ? 0 : (b0 / R[k]) % D[k];
  for (size_t j = 0; j < r; ++j) {
    if (iter_dims[j] <= 1 || s[j] == 0) continue;
    if (s[j] < 0) return std::nullopt;
    bool placed = false;
    for (size_t k = D.size(); k-- > 0;) {
      if (D[k] <= 1) continue;
      if (R[k] * D[k] > s[j]) {
        if (s[j] % R[k] != 0) return std::nullopt;
        out.A[k][j] = s[j] / R[k];
        placed = true;
        break;
      }
    }
    if (!placed) return std::nullopt;
  }
  for (size_t k = 0; k < D.size(); ++k) {
    int64_t top = out.b[k];
    for (size_t j = 0; j < r; ++j) top += out.A[k][j] * (iter_dims[j] - 1);
    if (top >= D[k] && top > 0) return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<AffineMap> compose_affine(const IndexChain& chain, const std::vector<int64_t>& iter_dims) {
  AffineMap m = AffineMap::identity(iter_dims.size());
  const size_t r = iter_dims.size();
  for (const Transform& t : chain) {
    AffineMap next;
    const size_t ri = t.in_dims.size();
    switch (t.kind) {
      case Transform::Kind::kBroadcast: {
        const size_t off = t.out_dims.size() - ri;
        next.A.assign(ri, std::vector<int64_t>(r, 0));
        next.b.assign(ri, 0);
        for (size_t k = 0; k < ri; ++k) {
          if (t.in_dims[k] == 1) continue;
          next.A[k] = m.A[k + off];
          next.b[k] = m.b[k + off];
        }
        break;
      }
      case Transform::Kind::kTranspose:
        next.A.resize(ri);
        next.b.resize(ri);
        for (size_t k = 0; k < ri; ++k) {
          next.A[t.a[k]] = m.A[k];
          next.b[t.a[k]] = m.b[k];
        }
        break;
      case Transform::Kind::kSlice:
        next = m;
        for (size_t k = 0; k < ri; ++k) {
          for (int64_t& x : next.A[k]) x *= t.b[k];
          next.b[k] = t.a[k] + t.b[k] * m.b[k];
        }
        break;
      case Transform::Kind::kReshape: {
        auto r2 = reshape_affine(m, t, iter_dims);
        if (!r2) return std::nullopt;
        next = std::move(*r2);
        break;
      }
      case Transform::Kind::kAffine:
        next.A.assign(ri, std::vector<int64_t>(r, 0));
        next.b = t.b;
        for (size_t k = 0; k < ri; ++k) {
          for (size_t j = 0; j < r; ++j) next.A[k][j] = t.a[k * r + j];
        }
        break;
      default:
        return std::nullopt;
    }
    m = std::move(next);
  }
  return m;
}

Resolved resolve(const IndexChain& chain, std::vector<int64_t> c) {
  Resolved r;
  for (const Transform& t : chain) {
    const size_t ri = t.in_dims.size();
    std::vector<int64_t> in(ri, 0);
    switch (t.kind) {
      case Transform::Kind::kBroadcast: {
        const size_t off = t.out_dims.size() - ri;
        for (size_t k = 0; k < ri; ++k) in[k] = t.in_dims[k] == 1 ? 0 : c[k + off];
        break;
      }
      case Transform::Kind::kTranspose:
        for (size_t k = 0; k < ri; ++k) in[t.a[k]] = c[k];
        break;
      case Transform::Kind::kSlice:
        for (size_t k = 0; k < ri; ++k) in[k] = t.a[k] + t.b[k] * c[k];
        break;
      case Transform::Kind::kReshape: {
        const std::vector<int64_t> os = row_major_strides(t.out_dims);
        int64_t flat = 0;
        for (size_t k = 0; k < c.size(); ++k) flat += os[k] * c[k];
        for (size_t k = ri; k-- > 0;) {
          in[k] = t.in_dims[k] == 0 ? 0 : flat % t.in_dims[k];
          flat = t.in_dims[k] == 0 ? 0 : flat / t.in_dims[k];
        }
        break;
      }
      case Transform::Kind::kPad:
        for (size_t k = 0; k < ri; ++k) {
          in[k] = c[k] - t.a[k];
          if (in[k] < 0 || in[k] >= t.in_dims[k]) {
            r.pad = true;
            return r;
          }
        }
        break;
      case Transform::Kind::kConcat: {
        in = c;
        int64_t pos = c[t.axis];
        size_t s = 0;
        while (s + 1 < t.b.size() && pos >= t.b[s]) pos -= t.b[s++];
        in[t.axis] = pos;
        r.source = static_cast<int>(s);
        break;
      }
      case Transform::Kind::kAffine: {
        const size_t r = c.size();
        for (size_t k = 0; k < ri; ++k) {
          in[k] = t.b[k];
          for (size_t j = 0; j < r; ++j) in[k] += t.a[k * r + j] * c[j];
        }
        break;
      }
      case Transform::Kind::kGather: {
        const size_t q = t.b.size();
        int64_t flat = 0;
        for (size_t k = 0; k < q; ++k) flat = flat * t.b[k] + c[t.axis + k];
        in.assign(c.begin(), c.begin() + t.axis);
        in.push_back(t.a[flat]);
        in.insert(in.end(), c.begin() + t.axis + q, c.end());
        break;
      }
    }
    c = std::move(in);
  }
  r.coords = std::move(c);
  return r;
}

}  // namespace opfuse::codegen
