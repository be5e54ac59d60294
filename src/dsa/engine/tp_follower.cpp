#include "dsa/engine/tp_follower.h"

#include <memory>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/engine/model_runner.h"
#include "dsa/engine/rank_step.h"
#include "dsa/engine/tp_wire.h"

namespace dsa::engine {

int64_t run_tp_follower(TensorParallelModels& models) {
  DSA_CHECK(models.distributed() && models.first_local_rank() > 0,
            "tensor parallel: the follower loop is for ranks above 0 in their own process");
  const int r = models.first_local_rank();
  parallel::Communicator& c = models.communicator(r);
  model::CausalLM& lm = models.model(r);
  std::string payload;
  TpCommand cmd = recv_command(c, payload);
  DSA_CHECK(cmd == TpCommand::Setup, "tensor parallel rank {}: rank 0 sent command {} before the set-up", r,
            static_cast<int>(cmd));
  TpSetup s = decode_tp_setup(payload);
  s.ko.device = lm.device();
  std::unique_ptr<kv::KvManager> pools;
  std::unique_ptr<ModelRunner> runner;
  std::string why;
  try {
    pools = std::make_unique<kv::KvManager>(lm.kv_requirements(), s.ko);
    if (const std::string mine = kv_layout(*pools); mine != s.layout) {
      why = fmt::format("its KV pools differ from rank 0's:\nrank 0:\n{}rank {}:\n{}", s.layout, r, mine);
    } else {
      lm.reserve(s.max_step_tokens, s.max_running);
      runner = std::make_unique<ModelRunner>(lm, *pools);
      runner->set_graphs(false);
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  gather_status(c, why.empty() ? 0 : 1);
  DSA_CHECK(why.empty(), "tensor parallel rank {}: {}", r, why);
  log_info("tensor parallel rank {} of {}: ready on {}, waiting for rank 0's steps", r, models.size(),
           lm.device().str());
  int64_t steps = 0;
  for (;;) {
    cmd = recv_command(c, payload);
    if (cmd == TpCommand::Stop) return steps;
    DSA_CHECK(cmd == TpCommand::Step, "tensor parallel rank {}: unexpected command {}", r, static_cast<int>(cmd));
    const RankStep step = decode_rank_step(payload);
    const StepResult res = runner->run_prepared(step.meta, step.rows);
    gather_tokens(c, res.tokens);
    ++steps;
  }
}

}  // namespace dsa::engine
