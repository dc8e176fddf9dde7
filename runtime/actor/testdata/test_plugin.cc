// A plugin for actor_test: registers "test.plugin_greeter", whose OnStart publishes its
// `greeting` setting as the actor's stage so the test can see that the plugin's code ran.
#include <string>

#include "runtime/actor/registry.h"

namespace tandem_test_plugin {

class Greeter : public tandem::Actor {
 public:
  explicit Greeter(const tandem::ConfigValue& section) : section_(section) {}

  tandem::Status OnStart() override {
    ASSIGN_OR_RETURN(std::string greeting, section_.GetString("greeting", "none"));
    SetStage("greeting=" + greeting);
    return tandem::Status::Ok();
  }

 private:
  tandem::ConfigValue section_;
};

TANDEM_REGISTER_ACTOR(Greeter, "test.plugin_greeter");

}  // namespace tandem_test_plugin
