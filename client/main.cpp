// symmesh: the command-line client.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>

#include "client/client.h"
#include "client/output.h"
#include "client/progress_line.h"
#include "common/errors.h"
#include "common/units.h"
#include "transport/secret_file.h"

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// How long a job runs before the progress line appears (tests set it).
std::chrono::milliseconds progress_after() {
  return symmesh::parse_duration(env_or("SYMMESH_PROGRESS_AFTER", "1s"), "SYMMESH_PROGRESS_AFTER");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace symmesh;
  CLI::App app{"symmesh: submit jobs to a symmesh cluster and watch it"};
  app.require_subcommand(1);
  std::string daemon = env_or("SYMMESH_DAEMON", "127.0.0.1:7400");
  std::string secret_file = env_or("SYMMESH_SECRET_FILE", "");
  std::string timeout_text = "3600s";
  std::string connect_timeout_text = "10s";
  bool json = false;
  app.add_option("--daemon", daemon, "HOST:PORT of any daemon (env SYMMESH_DAEMON)")
      ->capture_default_str();
  app.add_option("--secret-file", secret_file, "cluster secret (env SYMMESH_SECRET_FILE)");
  app.add_option("--timeout", timeout_text, "give up waiting for the daemon after this long")
      ->capture_default_str();
  app.add_option("--connect-timeout", connect_timeout_text,
                 "give up reaching the daemon after this long (it may still be starting)")
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");

  auto* status_cmd = app.add_subcommand("status", "the cluster as the daemon sees it");
  status_cmd->add_flag("--json", json, "print one JSON object");
  auto* jobs_cmd =
      app.add_subcommand("jobs", "queued and running jobs, then the last 50 finished (the root's)");
  jobs_cmd->add_flag("--json", json, "print one JSON object");
  uint64_t job_id = 0;
  auto* job_cmd = app.add_subcommand("job", "one job: its state, times and result");
  job_cmd->add_option("ID", job_id, "the job id (symmesh jobs lists them)")->required();
  std::string trace_file;
  job_cmd->add_option("--trace", trace_file,
                      "write the job's timeline (submitted with --trace) to FILE as Chrome "
                      "trace-event JSON, for Perfetto or chrome://tracing");
  job_cmd->add_flag("--json", json, "print one JSON object");
  auto* cancel_cmd =
      app.add_subcommand("cancel", "cancel a queued job, or abort a running one on every node");
  cancel_cmd->add_option("ID", job_id, "the job id")->required();
  cancel_cmd->add_flag("--json", json, "print one JSON object");

  auto* wait_cmd = app.add_subcommand(
      "wait",
      "follow a job (one submitted with --detach, say) to its result; leaving does not "
      "cancel it");
  wait_cmd->add_option("ID", job_id, "the job id")->required();
  wait_cmd->add_flag("--json", json, "print one JSON object");

  auto* submit_cmd = app.add_subcommand(
      "submit",
      "run a job on the whole cluster and wait for its result; interrupting the CLI cancels it");
  submit_cmd->require_subcommand(1);
  wire::JobSpec spec;
  bool trace = false;
  bool detach = false;
  // Options every kind of job takes.
  auto add_common = [&](CLI::App* cmd) {
    cmd->add_flag("--trace", trace,
                  "record every PE's timeline (then: symmesh job ID --trace FILE)");
    cmd->add_flag("--detach", detach,
                  "print the job's id once it is queued and return; the job runs on (then: "
                  "symmesh wait ID, symmesh job ID)");
    cmd->add_flag("--json", json, "print one JSON object");
  };

  auto* barrier_cmd = submit_cmd->add_subcommand("barrier", "barrier latency");
  std::string barrier_algo;  // empty: the cluster's default (symmeshd --barrier-algo)
  uint32_t k = 0;
  uint32_t barrier_iters = 1000;
  barrier_cmd
      ->add_option("--algo", barrier_algo,
                   "inter-node algorithm (default: the cluster's, symmeshd --barrier-algo)")
      ->check(CLI::IsMember({"dissemination", "kary", "pull"}));
  barrier_cmd->add_option("--k", k, "radix of the kary algorithm, 2..16 (default: the cluster's)")
      ->check(CLI::Range(2, 16));
  barrier_cmd->add_option("--iters", barrier_iters, "timed barriers (1..100000)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  add_common(barrier_cmd);

  auto* collective_cmd =
      submit_cmd->add_subcommand("collective", "a collective's time and bandwidth");
  std::string op, bytes_text, dtype = "f32", coll_algo = "auto", reduce = "sum";
  uint32_t coll_iters = 20;
  bool verify = false;
  collective_cmd->add_option("--op", op, "the collective")
      ->required()
      ->check(CLI::IsMember({"allreduce", "reduce-scatter", "allgather", "alltoall"}));
  collective_cmd->add_option("--bytes", bytes_text, "each PE's input (KiB, MiB, GiB suffixes)")
      ->required();
  collective_cmd->add_option("--dtype", dtype, "element type")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  collective_cmd->add_option("--algo", coll_algo, "ring, hier (or direct for alltoall); auto picks")
      ->check(CLI::IsMember({"auto", "ring", "hier", "direct"}))
      ->capture_default_str();
  collective_cmd->add_option("--reduce", reduce, "reduction (max: allreduce only)")
      ->check(CLI::IsMember({"sum", "max"}))
      ->capture_default_str();
  collective_cmd->add_option("--iters", coll_iters, "timed calls (1..100000)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  collective_cmd->add_flag("--verify", verify, "check every PE's output against the reference");
  add_common(collective_cmd);

  auto* transport_cmd = submit_cmd->add_subcommand(
      "transport", "put bandwidth or put_signal latency between PE 0 and node 1's first PE");
  std::string transport_op, transport_bytes = "8";
  uint32_t transport_iters = 100, window = 64;
  transport_cmd->add_option("--op", transport_op, "what to measure")
      ->required()
      ->check(CLI::IsMember({"put-bw", "put-signal-lat"}));
  transport_cmd->add_option("--bytes", transport_bytes, "bytes per put (KiB, MiB suffixes)")
      ->capture_default_str();
  transport_cmd->add_option("--window", window, "put-bw: puts per timed iteration (1..4096)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  transport_cmd->add_option("--iters", transport_iters, "timed iterations (1..100000)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  add_common(transport_cmd);

  auto* matmul_cmd = submit_cmd->add_subcommand(
      "matmul", "a fused matmul + collective operator against its sequential baseline");
  auto* mm = spec.mutable_matmul();
  std::string mm_op, mm_dtype = "bf16", mm_mode = "both", transfer = "pull";
  uint64_t m = 0, n = 0, kk = 0, seed = 1;
  uint32_t stages = 2, interval = 2, tile_m = 256, tile_n = 512, tile_k = 0, subtile_m = 64;
  uint32_t compute_threads = 1, comm_threads = 1, mm_iters = 5;
  std::string inputs, output;
  matmul_cmd->add_option("--op", mm_op, "the fused operator")
      ->required()
      ->check(CLI::IsMember({"matmul-reduce-scatter", "gemm-allreduce", "allgather-matmul"}));
  matmul_cmd->add_option("--m", m, "rows of A and C (allgather-matmul: of the gathered A)")
      ->required()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  matmul_cmd->add_option("--n", n, "columns of B and C")
      ->required()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  matmul_cmd->add_option("--k", kk, "columns of A, rows of B")
      ->required()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  matmul_cmd->add_option("--dtype", mm_dtype, "input type (accumulation is f32)")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}))
      ->capture_default_str();
  matmul_cmd->add_option("--mode", mm_mode, "fused, sequential (GEMM then collective), or both")
      ->check(CLI::IsMember({"fused", "sequential", "both"}))
      ->capture_default_str();
  matmul_cmd->add_option("--stages", stages, "matmul-reduce-scatter workspace stages (1..8)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  matmul_cmd
      ->add_option("--comm-interval", interval,
                   "matmul-reduce-scatter: tiles per destination rank per stage (1..4096)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  matmul_cmd->add_option("--transfer", transfer, "matmul-reduce-scatter: pull or push stages")
      ->check(CLI::IsMember({"pull", "push"}))
      ->capture_default_str();
  matmul_cmd->add_option("--tile-m", tile_m, "tile rows (1..4096)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  matmul_cmd->add_option("--tile-n", tile_n, "tile columns (1..4096)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  matmul_cmd->add_option("--tile-k", tile_k, "K step of a tile (0: all of K)")
      ->capture_default_str();
  matmul_cmd->add_option("--subtile-m", subtile_m, "gemm-allreduce: rows per reduce unit")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  matmul_cmd->add_option("--compute-threads", compute_threads, "GEMM threads per PE (1..64)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  matmul_cmd->add_option("--comm-threads", comm_threads, "communication threads per PE (1..64)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  matmul_cmd->add_option("--iters", mm_iters, "timed runs per mode, after a warm-up (1..1000)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  matmul_cmd->add_option("--seed", seed, "seed of the generated inputs")->capture_default_str();
  matmul_cmd->add_flag("--verify", verify, "check every PE's output against the f32 reference");
  matmul_cmd->add_option("--inputs", inputs,
                         "directory of A_<pe>.npy and B.npy, read by every daemon on its host, "
                         "inside its --data-dir (a relative path is taken from there)");
  matmul_cmd->add_option("--output", output,
                         "directory each daemon writes C_<pe>.npy (gather_out_<pe>.npy) into, "
                         "inside its --data-dir");
  add_common(matmul_cmd);

  // dispatch and combine take the same options; combine runs its own dispatch first, untimed.
  wire::MoeJob moe;
  uint64_t moe_tokens = 0, hidden = 0;
  uint32_t topk = 0, experts = 0, biases = 0, channels = 1, moe_iters = 5;
  uint32_t chunk = 16, nvl_ring = 64, rdma_ring = 64;
  uint64_t moe_seed = 1;
  std::string weighting = "topk", partial = "bf16", moe_algo = "hier", routing = "uniform";
  std::string moe_inputs, moe_output;
  std::vector<CLI::App*> moe_cmds;
  for (const char* name : {"dispatch", "combine"}) {
    auto* cmd = submit_cmd->add_subcommand(
        name, std::string(name) == "dispatch"
                  ? "MoE dispatch: every token to the PEs of its experts, one copy per node"
                  : "MoE combine (DeepEP's hierarchical combine): expert outputs back home, "
                    "reduced per node, then across nodes");
    cmd->add_option("--tokens", moe_tokens, "tokens per PE (0..1048576)")
        ->required()
        ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
    cmd->add_option("--hidden", hidden, "bf16 elements per token, a multiple of 8")->required();
    cmd->add_option("--topk", topk, "experts per token")->required();
    cmd->add_option("--experts", experts, "experts, a multiple of the PE count")->required();
    cmd->add_option("--weighting", weighting, "none (DeepEP normal mode) or topk")
        ->check(CLI::IsMember({"none", "topk"}))
        ->capture_default_str();
    cmd->add_option("--bias", biases, "bias tensors the receivers add (0..2)")
        ->check(CLI::Range(0, 2))
        ->capture_default_str();
    cmd->add_option("--partial-dtype", partial, "what partial sums travel in")
        ->check(CLI::IsMember({"bf16", "f32"}))
        ->capture_default_str();
    cmd->add_option("--channels", channels, "threads per PE (1..64)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    cmd->add_option("--algo", moe_algo, "combine: hier or flat (the baseline)")
        ->check(CLI::IsMember({"hier", "flat"}))
        ->capture_default_str();
    cmd->add_option("--routing", routing,
                    "uniform, skewed, or a directory (inside the daemons' --data-dir) of "
                    "topk_idx_<pe>.npy and topk_weights_<pe>.npy")
        ->capture_default_str();
    cmd->add_option("--chunk-tokens", chunk, "tokens per published tail (at most half a ring)")
        ->capture_default_str();
    cmd->add_option("--nvl-ring-tokens", nvl_ring, "per (channel, peer) shared-memory ring")
        ->capture_default_str();
    cmd->add_option("--rdma-ring-tokens", rdma_ring, "per (channel, node) RDMA ring")
        ->capture_default_str();
    cmd->add_option("--iters", moe_iters, "timed runs after a warm-up (1..1000)")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_option("--seed", moe_seed, "seed of the generated tokens and routing")
        ->capture_default_str();
    cmd->add_flag("--verify", verify, "check every PE's result against the reference");
    cmd->add_option("--inputs", moe_inputs,
                    "directory of x_<pe>.npy (and bias_<i>_<pe>.npy), read by every daemon, "
                    "inside its --data-dir");
    cmd->add_option("--output", moe_output,
                    "combine: directory for combined_x_<pe>.npy, inside the daemons' --data-dir");
    add_common(cmd);
    moe_cmds.push_back(cmd);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    if (json) {
      print_error_json(std::string(e.what()) + " (see symmesh --help)");
      return 2;
    }
    app.exit(e);  // prints the message
    return 2;
  }

  try {
    const auto timeout = parse_duration(timeout_text, "--timeout");
    const Deadline deadline = deadline_after(timeout);
    if (secret_file.empty()) {
      throw InvalidArgument(
          "no secret: set --secret-file or SYMMESH_SECRET_FILE (the file "
          "deploy/local-cluster.sh prints)");
    }
    const std::string secret = read_secret_file(secret_file);
    const HostPort address = parse_host_port(daemon, "--daemon");
    // A daemon that is not there fails fast; a job that runs long may use all of --timeout.
    const Deadline connect_deadline = std::min(
        deadline, deadline_after(parse_duration(connect_timeout_text, "--connect-timeout")));
    auto client = Client::connect(address, secret, "'" + secret_file + "'", connect_deadline);

    if (status_cmd->parsed()) {
      print_status(client->status(deadline), json);
      return 0;
    }
    if (jobs_cmd->parsed() || job_cmd->parsed() || cancel_cmd->parsed() || wait_cmd->parsed()) {
      // Jobs live at the root: any daemon names it in its status.
      wire::StatusReply status = client->status(deadline);
      if (status.node_rank() != 0) {
        if (status.node_size() == 0) throw PeerError("the daemon does not know the root yet");
        const HostPort root =
            parse_host_port(status.node(0).control_endpoint(), "the root's control endpoint");
        client = Client::connect(root, secret, "'" + secret_file + "'", connect_deadline);
        status = client->status(deadline);
      }
      if (jobs_cmd->parsed()) {
        print_jobs({status.jobs().begin(), status.jobs().end()}, json);
        return 0;
      }
      if (cancel_cmd->parsed()) {
        print_job(client->cancel(job_id, deadline), json);
        return 0;
      }
      if (wait_cmd->parsed()) {
        ProgressLine progress("job " + std::to_string(job_id), ProgressLine::wanted(json),
                              progress_after());
        const wire::JobResult result = client->wait(
            job_id, [&](const wire::JobEvent& event) { progress.update(event); }, deadline);
        progress.clear();
        print_result(result, json);
        return result.ok() ? 0 : 1;
      }
      const wire::JobRecord job = client->job(job_id, !trace_file.empty(), deadline);
      print_job(job, json, trace_file);
      return job.state() == "error" || job.state() == "cancelled" ? 1 : 0;
    }
    if (barrier_cmd->parsed()) {
      spec.mutable_barrier()->set_algo(barrier_algo);
      spec.mutable_barrier()->set_k(k);
      spec.mutable_barrier()->set_iters(barrier_iters);
    } else if (transport_cmd->parsed()) {
      auto* job = spec.mutable_transport();
      job->set_op(transport_op);
      job->set_bytes(parse_size(transport_bytes, "--bytes"));
      job->set_window(window);
      job->set_iters(transport_iters);
    } else if (moe_cmds[0]->parsed() || moe_cmds[1]->parsed()) {
      auto* job = spec.mutable_moe();
      job->set_op(moe_cmds[0]->parsed() ? "dispatch" : "combine");
      job->set_tokens(moe_tokens);
      job->set_hidden(hidden);
      job->set_topk(topk);
      job->set_experts(experts);
      job->set_weighting(weighting);
      job->set_biases(biases);
      job->set_partial_dtype(partial);
      job->set_channels(channels);
      job->set_algo(moe_algo);
      job->set_routing(routing);
      job->set_chunk_tokens(chunk);
      job->set_nvl_ring_tokens(nvl_ring);
      job->set_rdma_ring_tokens(rdma_ring);
      job->set_iters(moe_iters);
      job->set_seed(moe_seed);
      job->set_verify(verify);
      job->set_inputs(moe_inputs);
      job->set_output(moe_output);
    } else if (matmul_cmd->parsed()) {
      mm->set_op(mm_op);
      mm->set_m(m);
      mm->set_n(n);
      mm->set_k(kk);
      mm->set_dtype(mm_dtype);
      mm->set_mode(mm_mode);
      mm->set_stages(stages);
      mm->set_comm_interval(interval);
      mm->set_transfer(transfer);
      mm->set_tile_m(tile_m);
      mm->set_tile_n(tile_n);
      mm->set_tile_k(tile_k);
      mm->set_subtile_m(subtile_m);
      mm->set_compute_threads(compute_threads);
      mm->set_comm_threads(comm_threads);
      mm->set_iters(mm_iters);
      mm->set_seed(seed);
      mm->set_verify(verify);
      mm->set_inputs(inputs);
      mm->set_output(output);
    } else {
      auto* job = spec.mutable_collective();
      job->set_op(op);
      job->set_bytes(parse_size(bytes_text, "--bytes"));
      job->set_dtype(dtype);
      job->set_algo(coll_algo);
      job->set_reduce(reduce);
      job->set_iters(coll_iters);
      job->set_verify(verify);
    }
    spec.set_trace(trace);
    if (detach) {
      const uint64_t id = client->submit_detached(spec, deadline);
      if (json) {
        std::cout << nlohmann::json{{"job_id", id}, {"state", "queued"}}.dump() << "\n";
      } else {
        std::cout << "job " << id << " queued (detached): symmesh wait " << id << "\n";
      }
      return 0;
    }
    ProgressLine progress((submit_cmd->get_subcommands().front())->get_name(),
                          ProgressLine::wanted(json), progress_after());
    const wire::JobResult result = client->submit(
        spec, [&](const wire::JobEvent& event) { progress.update(event); }, deadline);
    progress.clear();
    print_result(result, json);
    if (trace && result.job_id() && !json) {
      std::cerr << "symmesh: job " << result.job_id()
                << " was traced; write its timeline with: symmesh job " << result.job_id()
                << " --trace job" << result.job_id() << ".json\n";
    }
    return result.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    if (json) {
      print_error_json(e.what());
    } else {
      std::cerr << "symmesh: " << e.what() << "\n";
    }
    return dynamic_cast<const PeerError*>(&e) ? 3
                                              : (dynamic_cast<const InvalidArgument*>(&e) ? 2 : 1);
  }
}
