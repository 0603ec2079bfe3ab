#include "trainc/compile/runtime/parameter_shadows.h"

#include "trainc/common/error.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/cast_kernel.h"

namespace trainc {
namespace {

int64_t version_of(const at::Tensor& tensor) { return static_cast<int64_t>(tensor.unsafeGetTensorImpl()->version_counter().current_version()); }

}  // namespace

ParameterShadows& ParameterShadows::instance() {
  // Never destroyed: shadows still held at exit are not freed into an allocator that may already
  // be gone (static destruction order across libraries is not defined).
  static ParameterShadows* registry = new ParameterShadows();
  return *registry;
}

void ParameterShadows::drop_expired() {
  // Parameters freed since they were tracked leave with their shadows.
  for (auto it = entries_.begin(); it != entries_.end();) it = it->second.parameter.expired() ? entries_.erase(it) : std::next(it);
}

void ParameterShadows::track(at::TensorList parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_expired();
  for (const at::Tensor& parameter : parameters) {
    TRAINC_CHECK(parameter.scalar_type() == at::kFloat, "ParameterShadows::track: a " + std::string(c10::toString(parameter.scalar_type())) +
                                                            " parameter (shadows are of float32 ones)");
    if (find(parameter) == nullptr) entries_.insert_or_assign(parameter.unsafeGetTensorImpl(), Entry(parameter));
  }
}

bool ParameterShadows::tracked(const at::Tensor& parameter) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return find(parameter) != nullptr;
}

void ParameterShadows::untrack(at::TensorList parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const at::Tensor& parameter : parameters) entries_.erase(parameter.unsafeGetTensorImpl());
}

ParameterShadows::Entry* ParameterShadows::find(const at::Tensor& parameter) {
  const auto it = entries_.find(parameter.unsafeGetTensorImpl());
  // A live weak reference pins the address: no other tensor can have it while the entry exists.
  return it == entries_.end() || it->second.parameter.expired() ? nullptr : &it->second;
}

const ParameterShadows::Entry* ParameterShadows::find(const at::Tensor& parameter) const {
  return const_cast<ParameterShadows*>(this)->find(parameter);
}

bool ParameterShadows::is_fresh(const Entry& entry, const at::Tensor& parameter) {
  return entry.fresh && entry.data == parameter.data_ptr() && entry.version == version_of(parameter);
}

void ParameterShadows::record_written(Entry& entry, const at::Tensor& parameter) {
  entry.fresh = true;
  entry.data = parameter.data_ptr();
  entry.version = version_of(parameter);
}

void ParameterShadows::cast_into(const std::vector<Entry*>& entries, const std::vector<at::Tensor>& parameters) {
  if (entries.empty()) return;
  std::vector<at::Tensor> destinations;
  for (const Entry* entry : entries) destinations.push_back(entry->shadow);
  if (optimization_enabled(Optimization::cast_kernel) && bf16_cast_kernel_takes(destinations, parameters)) {
    bf16_cast_kernel(destinations, parameters);
  } else {
    for (std::size_t i = 0; i < entries.size(); ++i) destinations[i].copy_(parameters[i]);
  }
  for (std::size_t i = 0; i < entries.size(); ++i) record_written(*entries[i], parameters[i]);
}

std::vector<at::Tensor> ParameterShadows::shadows(at::TensorList parameters, const std::vector<int64_t>& padded_rows) {
  TRAINC_CHECK(padded_rows.size() == parameters.size(), "ParameterShadows::shadows: one padded row count per parameter");
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<at::Tensor> result(parameters.size());
  std::vector<Entry*> stale;
  std::vector<at::Tensor> stale_parameters;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const at::Tensor& parameter = parameters[i];
    Entry* entry = find(parameter);
    if (entry == nullptr || !parameter.is_contiguous()) continue;
    if (!entry->shadow.defined()) {
      const int64_t rows = parameter.dim() == 0 ? 1 : parameter.size(0);
      if (parameter.dim() > 0 && padded_rows[i] > rows) {
        std::vector<int64_t> sizes = parameter.sizes().vec();
        sizes[0] = padded_rows[i];
        entry->base = at::empty(sizes, parameter.options().dtype(at::kBFloat16));
        entry->base.narrow(0, rows, padded_rows[i] - rows).zero_();
        entry->shadow = entry->base.narrow(0, 0, rows);
      } else {
        entry->shadow = at::empty(parameter.sizes(), parameter.options().dtype(at::kBFloat16));
        entry->base = entry->shadow;
      }
      entry->fresh = false;
      ++generation_;
    }
    if (!is_fresh(*entry, parameter)) {
      stale.push_back(entry);
      stale_parameters.push_back(parameter);
    }
    result[i] = entry->shadow;
  }
  cast_into(stale, stale_parameters);
  return result;
}

std::vector<at::Tensor> ParameterShadows::shadows_to_update(at::TensorList parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<at::Tensor> result(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Entry* entry = find(parameters[i]);
    if (entry != nullptr) result[i] = entry->shadow;
  }
  return result;
}

void ParameterShadows::updated(at::TensorList parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const at::Tensor& parameter : parameters) {
    Entry* entry = find(parameter);
    if (entry != nullptr && entry->shadow.defined()) record_written(*entry, parameter);
  }
}

void ParameterShadows::cast_shadows(at::TensorList parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry*> entries;
  std::vector<at::Tensor> sources;
  for (const at::Tensor& parameter : parameters) {
    Entry* entry = find(parameter);
    if (entry == nullptr || !entry->shadow.defined()) continue;
    entries.push_back(entry);
    sources.push_back(parameter);
  }
  cast_into(entries, sources);
}

int64_t ParameterShadows::generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return generation_;
}

void ParameterShadows::mark_all_stale() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [impl, entry] : entries_) entry.fresh = false;
}

void ParameterShadows::refresh_stale() {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_expired();
  std::vector<Entry*> stale;
  std::vector<at::Tensor> parameters;
  for (auto& [impl, entry] : entries_) {
    if (!entry.shadow.defined()) continue;
    at::Tensor parameter(entry.parameter.lock());
    if (!parameter.defined() || is_fresh(entry, parameter)) continue;
    stale.push_back(&entry);
    parameters.push_back(std::move(parameter));
  }
  cast_into(stale, parameters);
}

void ParameterShadows::mark_stale(at::TensorList parameters) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const at::Tensor& parameter : parameters) {
    Entry* entry = find(parameter);
    if (entry != nullptr) entry->fresh = false;
  }
}

at::Tensor ParameterShadows::padded_base(const at::Tensor& tensor, int64_t padded_rows) const {
  if (!tensor.defined() || tensor.dim() == 0 || tensor.scalar_type() != at::kBFloat16) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [impl, entry] : entries_) {
    if (!entry.shadow.defined() || entry.base.size(0) != padded_rows || entry.base.data_ptr() != tensor.data_ptr()) continue;
    if (tensor.sizes() == entry.shadow.sizes() && tensor.strides() == entry.shadow.strides()) return entry.base;
  }
  return {};
}

}  // namespace trainc
