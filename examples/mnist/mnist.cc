// Data-parallel MNIST with horovodcpp: LibTorch's classic MNIST network and training loop plus
// the few lines Horovod adds (marked HVD). Run it under the launcher, one process per slot:
//
//   scripts/fetch-mnist.sh                     # 8,000 train / 2,000 test real digits
//   build/launcher/hvdrun -np 2 build/examples/mnist/mnist
//
// Each rank trains on its shard of the digits, the learning rate is scaled by the number of
// ranks, rank 0's initial state is broadcast, gradients are averaged while backward runs, test
// accuracy is computed over all ranks' shards, and rank 0 alone writes the checkpoint, which
// --resume loads at any world size. --adasum combines the ranks' updates with Adasum instead of
// averaging gradients (as Horovod's pytorch_mnist.py --use-adasum), and then the learning rate is
// not scaled by the ranks that Adasum combines.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "horovodcpp/torch.h"
#include "idx_dataset.h"

namespace ht = hvd::torch;

namespace {

struct Args {
  std::string data = "data/mnist";
  std::string checkpoint = "data/mnist-checkpoint.pt";  // written by rank 0 after every epoch
  std::string resume;                                   // checkpoint to start from
  int epochs = 10;
  std::int64_t batch_size = 32;  // per rank
  double lr = 0.01;              // per rank: the optimizer gets lr * size (see lr_scale)
  double momentum = 0.9;
  bool fp16 = false;
  bool adasum = false;  // DistributedOptimizerOptions::op = Adasum
  int log_interval = 25;
  std::uint64_t seed = 42;
  int threads = 0;             // intra-op threads per rank; 0: cores / local ranks
  double min_accuracy = -1.0;  // exit 1 if the final test accuracy is lower
  std::string device = "cpu";  // or "cuda": each rank trains on GPU local_rank % devices
};

void usage() {
  std::cout << "usage: mnist [--data DIR] [--epochs N] [--batch-size B] [--lr LR] [--momentum M] [--fp16] [--adasum]\n"
               "             [--checkpoint PATH|''] [--resume PATH] [--log-interval N] [--seed S]\n"
               "             [--threads T] [--min-accuracy FRACTION] [--device cpu|cuda]\n";
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--data") a.data = value();
    else if (flag == "--checkpoint") a.checkpoint = value();
    else if (flag == "--resume") a.resume = value();
    else if (flag == "--epochs") a.epochs = std::stoi(value());
    else if (flag == "--batch-size") a.batch_size = std::stoll(value());
    else if (flag == "--lr") a.lr = std::stod(value());
    else if (flag == "--momentum") a.momentum = std::stod(value());
    else if (flag == "--fp16") a.fp16 = true;
    else if (flag == "--adasum") a.adasum = true;
    else if (flag == "--log-interval") a.log_interval = std::stoi(value());
    else if (flag == "--seed") a.seed = std::stoull(value());
    else if (flag == "--threads") a.threads = std::stoi(value());
    else if (flag == "--min-accuracy") a.min_accuracy = std::stod(value());
    else if (flag == "--device") a.device = value();
    else if (flag == "-h" || flag == "--help") { usage(); std::exit(0); }
    else throw std::runtime_error("unknown argument " + flag);
  }
  if (a.epochs < 1 || a.batch_size < 1 || a.lr <= 0 || a.log_interval < 1)
    throw std::runtime_error("--epochs, --batch-size, --lr and --log-interval must be positive");
  if (a.device != "cpu" && a.device != "cuda") throw std::runtime_error("--device must be cpu or cuda, not " + a.device);
  return a;
}

// LibTorch's MNIST example network.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        conv2_drop(register_module("conv2_drop", torch::nn::Dropout2d())),
        fc1(register_module("fc1", torch::nn::Linear(320, 50))),
        fc2(register_module("fc2", torch::nn::Linear(50, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = torch::relu(fc1->forward(x.view({-1, 320})));
    x = torch::dropout(x, 0.5, is_training());
    return torch::log_softmax(fc2->forward(x), 1);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// LibTorch's errors carry a C++ backtrace; users need the first line.
std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Rank 0 only. Written to a temporary name first so a crash never leaves half a checkpoint.
void save_checkpoint(const std::string& path, Net& model, ht::DistributedOptimizer& opt, int epoch, double lr) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive(archive.compilation_unit());
  model->save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive(archive.compilation_unit());
  opt.optimizer().save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("epoch", c10::IValue(static_cast<std::int64_t>(epoch)));
  archive.write("base_lr", c10::IValue(lr));
  archive.write("world_size", c10::IValue(static_cast<std::int64_t>(hvd::size())));
  archive.save_to(path + ".tmp");
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + path + ".tmp to " + path);
}

// Rank 0 only: loads model and optimizer state onto `device`; returns the last finished epoch.
std::int64_t load_checkpoint(const std::string& path, Net& model, torch::optim::Optimizer& optimizer,
                             torch::Device device) {
  torch::serialize::InputArchive archive;
  archive.load_from(path, device);
  torch::serialize::InputArchive model_archive, optimizer_archive;
  archive.read("model", model_archive);
  model->load(model_archive);
  archive.read("optimizer", optimizer_archive);
  optimizer.load(optimizer_archive);
  c10::IValue epoch, world_size;
  archive.read("epoch", epoch);
  archive.read("world_size", world_size);
  std::cout << "resumed " << path << ": epoch " << epoch.toInt() << " finished at " << world_size.toInt()
            << " ranks; continuing at " << hvd::size() << std::endl;
  return epoch.toInt();
}

template <class Loader>
void train_epoch(Net& model, ht::DistributedOptimizer& opt, Loader& loader, int epoch, std::size_t shard,
                 const Args& args, torch::Device device) {
  model->train();
  const int size = hvd::size();
  auto start = Clock::now();
  auto window = start;
  std::size_t seen = 0, window_images = 0, batch_index = 0;
  for (auto& batch : *loader) {
    opt.zero_grad();
    torch::Tensor loss = torch::nll_loss(model->forward(batch.data.to(device)), batch.target.to(device));
    loss.backward();  // HVD: gradient allreduces start here, layer by layer
    opt.step();       // HVD: waits for them, then SGD
    seen += batch.data.size(0);
    window_images += batch.data.size(0);
    if (++batch_index % args.log_interval == 0 && hvd::rank() == 0) {
      std::printf("epoch %d [%5zu/%zu (%3.0f%%)]  loss %.4f  %.0f images/s\n", epoch, seen * size, shard * size,
                  100.0 * seen / shard, loss.item<double>(), window_images * size / seconds_since(window));
      window = Clock::now();
      window_images = 0;
    }
  }
  if (hvd::rank() == 0)
    std::printf("epoch %d: trained on %zu images in %.1f s, %.0f images/s over %d rank(s)\n", epoch, seen * size,
                seconds_since(start), seen * size / seconds_since(start), size);
}

// Accuracy over the whole test set: each rank scores its shard, the sums are reduced.
double test(Net& model, mnist::IdxDataset& dataset, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  torch::data::samplers::DistributedSequentialSampler sampler(*dataset.size(), hvd::size(), hvd::rank(), false);
  auto loader = torch::data::make_data_loader(dataset.map(torch::data::transforms::Stack<>()), sampler,
                                              torch::data::DataLoaderOptions(500));
  auto totals = torch::zeros({3}, torch::kFloat64);  // loss sum, correct, count
  for (auto& batch : *loader) {
    auto output = model->forward(batch.data.to(device));
    const auto target = batch.target.to(device);
    totals[0] += torch::nll_loss(output, target, {}, at::Reduction::Sum).item<double>();
    totals[1] += output.argmax(1).eq(target).sum().item<double>();
    totals[2] += batch.data.size(0);
  }
  ht::allreduce_(totals, {hvd::ReduceOp::Sum, "test.totals"});  // HVD
  const double count = totals[2].item<double>();
  const double accuracy = totals[1].item<double>() / count;
  if (hvd::rank() == 0)
    std::printf("test: loss %.4f, accuracy %.2f%% (%.0f held-out digits)\n", totals[0].item<double>() / count,
                100.0 * accuracy, count);
  return accuracy;
}

int run(const Args& args) {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  torch::set_num_threads(args.threads > 0 ? args.threads : std::max(1, cores / hvd::local_size()));
  torch::manual_seed(args.seed + rank);  // dropout and shuffles differ; weights come from rank 0

  mnist::IdxDataset train_set(args.data, "train"), test_set(args.data, "t10k");
  torch::Device device(torch::kCPU);
  if (args.device == "cuda") {
    if (!torch::cuda::is_available()) throw std::runtime_error("--device cuda: this LibTorch sees no CUDA device");
    device = torch::Device(torch::kCUDA, hvd::local_rank() % static_cast<int>(torch::cuda::device_count()));
  }
  Net model;
  model->to(device);  // before the optimizer takes the parameters
  // HVD: scale the learning rate by the number of ranks whose gradients are averaged (the global
  // batch grows with them). Adasum adds orthogonal updates and averages parallel ones, so it
  // needs no scaling, except within a node for CUDA tensors, which it averages there (README,
  // "Adasum").
  const int lr_scale = !args.adasum ? size : device.is_cuda() ? hvd::local_size() : 1;
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(args.lr * lr_scale).momentum(args.momentum));
  std::int64_t finished = 0;
  std::string resume_error;
  if (!args.resume.empty() && rank == 0) {
    try {
      finished = load_checkpoint(args.resume, model, sgd, device);
    } catch (const std::exception& e) {
      resume_error = "cannot resume from " + args.resume + ": " + message_of(e);
    }
  }
  // HVD: every rank learns the outcome, so a failed load stops all of them, not just rank 0.
  resume_error = ht::broadcast_object(resume_error, 0, "resume.error");
  if (!resume_error.empty()) throw std::runtime_error(resume_error);
  finished = ht::broadcast_object(finished, 0, "resume.epoch");
  ht::broadcast_parameters(*model, 0);                            // HVD: rank 0's weights everywhere
  ht::DistributedOptimizerOptions options;
  options.compression = args.fp16 ? hvd::Compression::FP16 : hvd::Compression::None;
  if (args.adasum) options.op = hvd::ReduceOp::Adasum;
  ht::DistributedOptimizer opt(std::move(sgd), model->named_parameters(), options);  // HVD
  ht::broadcast_optimizer_state(opt, 0);                                             // HVD
  for (auto& group : opt.param_groups()) group.options().set_lr(args.lr * lr_scale);  // also after a resume
  if (rank == 0)
    std::printf("mnist: %d rank(s) on %s, %zu training / %zu test digits, batch %lld per rank, lr %.4g%s\n", size,
                device.str().c_str(), *train_set.size(), *test_set.size(), static_cast<long long>(args.batch_size),
                args.lr * lr_scale, args.adasum ? ", Adasum" : "");

  double accuracy = 0;
  for (int epoch = static_cast<int>(finished) + 1; epoch <= args.epochs; ++epoch) {
    // HVD: each rank draws its own shard; every shard has the same length, so the ranks step
    // together.
    torch::data::samplers::DistributedRandomSampler sampler(*train_set.size(), size, rank, true);
    sampler.set_epoch(epoch);
    const std::size_t shard = (*train_set.size() + size - 1) / size;  // with duplicates: ceil
    auto loader = torch::data::make_data_loader(train_set.map(torch::data::transforms::Stack<>()), sampler,
                                                torch::data::DataLoaderOptions(args.batch_size));
    train_epoch(model, opt, loader, epoch, shard, args, device);
    accuracy = test(model, test_set, device);
    if (rank == 0 && !args.checkpoint.empty()) save_checkpoint(args.checkpoint, model, opt, epoch, args.lr);
  }
  if (finished >= args.epochs) accuracy = test(model, test_set, device);
  if (args.min_accuracy >= 0 && accuracy < args.min_accuracy) {
    if (rank == 0) std::printf("test accuracy %.4f is below --min-accuracy %.4f\n", accuracy, args.min_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::init();  // HVD
  int rc = 0;
  try {
    rc = run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "mnist (rank " << hvd::rank() << "): " << message_of(e) << std::endl;
    rc = 2;
  }
  hvd::shutdown();
  return rc;
}
