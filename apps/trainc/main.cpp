// trainc: train a model from a YAML run config.
//
//   trainc [--config run.yaml] [--print-config] [--dump-dir DIR] [--<any-config-key> VALUE ...]
//   trainc explain [same options]    plan the compiled step and print what the planner sees
//   trainc --nproc-per-node N [...]  N data-parallel workers on this host (as torchrun starts them)
//
// Every config key is a flag (dash or underscore spelling; model/data keys as --model.n-layer).
// Errors in the config or the flags exit with code 2 and one line on stderr.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>

#include "trainc/common/error.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/kernel_profile.h"
#include "trainc/config/emit.h"
#include "trainc/config/fields.h"
#include "trainc/config/load.h"
#include "trainc/config/reference.h"
#include "trainc/config/resolve.h"
#include "trainc/distributed/launch.h"
#include "trainc/train/run.h"

namespace {

// "--learning_rate=1" -> "--learning-rate=1": both spellings reach the same dash-case option.
std::vector<std::string> normalized_arguments(int argc, char** argv, int first) {
  std::vector<std::string> arguments;
  for (int i = argc - 1; i >= first; --i) {  // CLI11 takes its arguments in reverse order
    std::string argument = argv[i];
    if (argument.rfind("--", 0) == 0) {
      const std::size_t name_end = std::min(argument.find('='), argument.size());
      std::replace(argument.begin(), argument.begin() + static_cast<std::ptrdiff_t>(name_end), '_', '-');
    }
    arguments.push_back(argument);
  }
  return arguments;
}

// "--output-dir --overwrite-output-dir": a flag that takes a value, followed by another flag rather
// than its value. The parser would take the second flag as the value (a directory named
// "--overwrite-output-dir"); write "--output-dir=--x" for such a value on purpose. `app` knows
// which of its options take a value.
void reject_flags_as_values(const CLI::App& app, int argc, char** argv, int first) {
  auto takes_value = [&](const std::string& flag) {
    const CLI::Option* option = app.get_option_no_throw(flag);
    return option != nullptr && option->get_expected_min() > 0;
  };
  for (int i = first; i + 1 < argc; ++i) {
    std::string flag = argv[i];
    const std::string next = argv[i + 1];
    if (flag.rfind("--", 0) != 0 || flag.find('=') != std::string::npos) continue;
    std::replace(flag.begin(), flag.end(), '_', '-');
    const bool next_is_flag = next.size() > 2 && next.rfind("--", 0) == 0 && std::isalpha(static_cast<unsigned char>(next[2]));
    if (next_is_flag && takes_value(flag)) {
      throw trainc::UserError(flag + ": got the flag " + next + ", expected a value (write " + flag + "=" + next +
                              " if that is the value)");
    }
  }
}

// "--bf16=" or "--bf16 ''": an empty value is not the bare flag, which means true (an unset
// variable in "--overwrite-output-dir=$KEEP" must not turn it on); nor is a value missing at the
// end of the line ("--max-steps") a value. Both are refused naming the flag and what it takes,
// before the parser's own words ("1 required int missing").
void reject_empty_values(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.rfind("--", 0) != 0) continue;
    const std::size_t equals = argument.find('=');
    std::string flag = argument.substr(0, equals);
    std::replace(flag.begin(), flag.end(), '_', '-');
    const trainc::FieldInfo* field = trainc::find_field(trainc::key_from_flag(flag));
    if (field == nullptr) continue;
    const bool empty = equals != std::string::npos ? equals + 1 == argument.size() : i + 1 < argc && argv[i + 1][0] == '\0';
    const bool missing = equals == std::string::npos && !field->is_bool && i + 1 == argc;
    if (!empty && !missing) continue;
    std::string expected = field->is_bool ? "true or false (or the bare flag for true)" : "a value (" + field->type_name + ")";
    if (field->type_name.rfind("list", 0) == 0) expected += "; write [] for an empty list";
    if (field->type_name == "mapping") expected += "; write {} for an empty mapping";
    throw trainc::UserError(flag + ": got " + (empty ? "an empty value" : "no value") + ", expected " + expected);
  }
}

// The command line minus --nproc-per-node (either spelling, "N" or "=N"): what each worker runs.
std::vector<std::string> worker_arguments(int argc, char** argv) {
  std::vector<std::string> arguments;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::replace(flag.begin(), flag.begin() + static_cast<std::ptrdiff_t>(std::min(flag.find('='), flag.size())), '_', '-');
    if (flag == "--nproc-per-node") {
      ++i;  // and its value
      continue;
    }
    if (flag.rfind("--nproc-per-node=", 0) == 0) continue;
    arguments.push_back(argv[i]);
  }
  return arguments;
}

std::string default_text(const trainc::FieldInfo& field) {
  YAML::Emitter out;
  out << YAML::Flow << field.default_value;
  return out.c_str();
}

int run(int argc, char** argv) {
  CLI::App app{"trainc: train a model from a YAML run config (keys follow Hugging Face's TrainingArguments)",
               "trainc"};
  app.get_formatter()->column_width(40);
  app.footer("Subcommand:\n  trainc explain [options]      Plan the compiled training step of the config's first batch and print\n"
             "                                the captured ops, graph breaks, backend and mode, and planned kernels");
  const bool explain = argc > 1 && std::string(argv[1]) == "explain";
  trainc::RunOptions run_options;
  app.add_option("--dump-dir", run_options.dump_dir,
                 "Write each compiled step's traced graph, IR, joint graph and programs here as text")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  int nproc_per_node = 1;
  app.add_option("--nproc-per-node", nproc_per_node,
                 "Start N data-parallel worker processes on this host, as torchrun --nproc-per-node does")
      ->check(CLI::Range(1, 1024))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string config_path;
  bool print_config = false;
  app.add_option("--config", config_path, "YAML run config; without it, the built-in quickstart config")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // as every flag: the last one given counts
  app.add_flag("--print-config", print_config, "Print the fully resolved config as YAML and exit");
  bool print_reference = false;
  app.add_flag("--print-config-reference", print_reference, "Print the config reference (docs/config.md) and exit");

  std::map<const trainc::FieldInfo*, CLI::Option*> field_options;
  for (const trainc::FieldInfo& field : trainc::config_fields()) {
    std::string description = field.help;
    if (!field.choices.empty()) description += " {" + trainc::join(field.choices, ", ") + "}";
    if (!field.applies_to.empty()) description += " (" + trainc::join(field.applies_to, ", ") + ")";
    // The default goes into the description: CLI11 would also use default_str as the value of a
    // bare boolean flag, and a bare --bf16 must mean true.
    description += " [default: " + default_text(field) + "]";
    CLI::Option* option = app.add_option(field.flag())->description(description);
    option->type_name(field.type_name);
    option->group(field.section.empty() ? "TrainingArguments" : field.section + " section");
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if (field.is_bool) option->expected(0, 1);
    field_options[&field] = option;
  }
  app.allow_extras();

  reject_flags_as_values(app, argc, argv, explain ? 2 : 1);
  reject_empty_values(argc, argv, explain ? 2 : 1);
  try {
    app.parse(normalized_arguments(argc, argv, explain ? 2 : 1));
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    throw trainc::UserError(error.what());
  }

  if (print_reference) {
    std::cout << trainc::config_reference_markdown();
    return trainc::kExitOk;
  }

  std::vector<trainc::CommandLineOverride> overrides;
  bool after_unknown_flag = false;
  for (const std::string& extra : app.remaining()) {
    const std::string flag = extra.substr(0, extra.find('='));
    if (flag.rfind("--", 0) == 0) {
      overrides.push_back({flag, std::nullopt});  // unknown: apply_override reports it with a suggestion
    } else if (!after_unknown_flag) {
      throw trainc::UserError("unexpected argument '" + extra + "' (trainc --help lists the flags)");
    }
    after_unknown_flag = flag.rfind("--", 0) == 0;  // the word after an unknown flag is its value
  }
  for (const auto& [field, option] : field_options) {
    if (option->count() == 0) continue;
    const auto& results = option->results();
    overrides.push_back({field->flag(), results.empty() || results.back().empty() ? std::nullopt
                                                                                   : std::optional<std::string>(results.back())});
  }

  if (app.count("--config") > 0 && config_path.empty()) throw trainc::UserError("--config: got an empty path, expected a YAML file");
  if (app.count("--dump-dir") > 0 && run_options.dump_dir.find_first_not_of(" \t\n\r\v\f") == std::string::npos) {
    throw trainc::UserError("--dump-dir: got " + std::string(run_options.dump_dir.empty() ? "an empty path" : "only blanks") +
                            ", expected a directory");
  }
  std::vector<std::string> warnings;
  const trainc::RunConfig config = trainc::build_run_config(
      config_path.empty() ? std::nullopt : std::optional<std::string>(config_path), overrides, &warnings);
  if (print_config) {
    std::cout << trainc::to_yaml_text(config);
    return trainc::kExitOk;
  }
  if (!run_options.dump_dir.empty()) {
    std::error_code error;
    if (std::filesystem::exists(run_options.dump_dir, error) && !std::filesystem::is_directory(run_options.dump_dir, error)) {
      throw trainc::UserError("--dump-dir: " + run_options.dump_dir + " exists and is not a directory");
    }
    // A file on the way ("a_file/dumps") would stop the first compile with the file system's words.
    for (std::filesystem::path above = std::filesystem::path(run_options.dump_dir).parent_path(); !above.empty();
         above = above.parent_path()) {
      if (!std::filesystem::exists(above, error)) continue;
      if (!std::filesystem::is_directory(above, error)) {
        throw trainc::UserError("--dump-dir: " + run_options.dump_dir + " lies under " + above.string() + ", which is not a directory");
      }
      break;
    }
    if (!explain && !config.args.torch_compile) {
      throw trainc::UserError("--dump-dir: writes the compiled steps' graphs, but torch_compile is false (set --torch-compile)");
    }
  }
  const std::string source = config_path.empty() ? trainc::kBuiltinConfigName : config_path;
  trainc::check_disabled_optimizations();
  trainc::kernel_profile_requested();  // a value it does not take stops the run here, before anything is written
  if (explain) return trainc::run_explain(config, source, run_options);
  if (nproc_per_node > 1) {
    if (std::getenv("WORLD_SIZE") != nullptr) {
      throw trainc::UserError("--nproc-per-node " + std::to_string(nproc_per_node) + " with WORLD_SIZE=" + std::getenv("WORLD_SIZE") +
                              " already set: start workers either with a launcher (torchrun) or with --nproc-per-node, not both");
    }
    return trainc::launch_local_workers(nproc_per_node, worker_arguments(argc, argv));
  }
  return trainc::run_training(config, source, warnings, run_options);
}

}  // namespace

// Training frees and allocates the same large tensors every step. glibc gives blocks above its
// mmap threshold back to the kernel when freed, so every step pays page faults again (a quarter of
// a small gpt's step time on 2 vCPUs: docs/benchmarks.md). Keep freed memory in the heap for reuse
// instead, unless the environment tunes malloc itself.
void keep_freed_memory_for_reuse() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
      std::getenv("GLIBC_TUNABLES") != nullptr) {
    return;
  }
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

int main(int argc, char** argv) {
  keep_freed_memory_for_reuse();
  try {
    return run(argc, argv);
  } catch (const trainc::UserError& error) {
    std::cerr << "trainc: error: " << error.what() << "\n";
    return error.exit_code();
  } catch (const c10::Error& error) {
    // LibTorch's message without its C++ stack, which says nothing to a user.
    std::cerr << "trainc: error: " << error.what_without_backtrace() << "\n";
    return trainc::kExitFailure;
  } catch (const std::exception& error) {
    std::cerr << "trainc: error: " << error.what() << "\n";
    return trainc::kExitFailure;
  }
}
