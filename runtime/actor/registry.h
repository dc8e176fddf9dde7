// ActorRegistry: actor classes by name, so a job file's `class = "my.actor"` can build them.
//
//   class MyActor : public tandem::Actor {
//    public:
//     // Any one of these is used, in this order of preference:
//     static Result<std::unique_ptr<MyActor>> Create(const ConfigValue&, const ActorContext&);
//     MyActor(const ConfigValue& section, const ActorContext& ctx);
//     MyActor(const ConfigValue& section);
//     MyActor();
//   };
//   TANDEM_REGISTER_ACTOR(MyActor, "my.actor", MyActorKeys());   // at namespace scope in a .cc file
//
// The third argument, a KeyTable (config_keys.h), declares the keys the class reads from its
// [actors.NAME] section; the job layer rejects any other key, an ill-typed or an out-of-range
// value before the job starts, and `tandem keys` lists them. It may be left out
// (TANDEM_REGISTER_ACTOR(MyActor, "my.actor")): the class still works, but its keys go
// unchecked and `tandem validate` says so.
//
// Registration runs in a static initialiser, also inside plugins loaded with LoadPlugin().
// A second class under a taken name is refused and remembered as a conflict (LoadPlugin
// reports it). A factory that throws yields an Internal error, never an exception.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

#include "runtime/actor/actor.h"
#include "runtime/actor/cell.h"
#include "runtime/actor/config.h"
#include "runtime/actor/config_keys.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

struct ActorClass {
  std::string name;                            // "my.actor"
  ActorFactory factory;                        // builds a fresh instance
  std::type_index type = typeid(void);         // the C++ class, for typed handles
  std::shared_ptr<const KeyTable> keys;        // its declared keys; null: declares none
};

class ActorRegistry {
 public:
  // The process-wide registry that TANDEM_REGISTER_ACTOR fills.
  static ActorRegistry& Global();

  // Adds `cls`; InvalidArgument if the name is taken or the class is incomplete.
  Status Register(ActorClass cls);
  // The class named `name`, or NotFound listing the known names.
  Result<ActorClass> Find(std::string_view name) const;
  // Sorted class names.
  std::vector<std::string> Names() const;
  // Messages of refused registrations since the start, in order.
  std::vector<std::string> Conflicts() const;

  // An ActorClass for A built from whichever constructor or Create() A offers (see above).
  template <typename A>
  static ActorClass ClassOf(std::string name);
  template <typename A>
  static ActorClass ClassOf(std::string name, KeyTable keys);

 private:
  mutable std::mutex mu_;
  std::vector<ActorClass> classes_ GUARDED_BY(mu_);
  std::vector<std::string> conflicts_ GUARDED_BY(mu_);
};

namespace internal {

// Used by TANDEM_REGISTER_ACTOR; logs and records a refused registration.
bool RegisterActorAtStartup(ActorClass cls);

template <typename A>
Result<std::unique_ptr<Actor>> BuildActor(const ConfigValue& section, const ActorContext& ctx) {
  static_assert(std::is_base_of_v<Actor, A>, "actor classes derive from tandem::Actor");
  if constexpr (requires { A::Create(section, ctx); }) {
    auto made = A::Create(section, ctx);
    if (!made.ok()) return made.status();
    return std::unique_ptr<Actor>(std::move(made).value());
  } else if constexpr (std::is_constructible_v<A, const ConfigValue&, const ActorContext&>) {
    return std::unique_ptr<Actor>(std::make_unique<A>(section, ctx));
  } else if constexpr (std::is_constructible_v<A, const ConfigValue&>) {
    return std::unique_ptr<Actor>(std::make_unique<A>(section));
  } else {
    static_assert(std::is_default_constructible_v<A>,
                  "an actor class needs Create(section, ctx), a constructor taking "
                  "(const ConfigValue&[, const ActorContext&]), or a default constructor");
    return std::unique_ptr<Actor>(std::make_unique<A>());
  }
}

}  // namespace internal

template <typename A>
ActorClass ActorRegistry::ClassOf(std::string name) {
  return ActorClass{std::move(name), &internal::BuildActor<A>, std::type_index(typeid(A)),
                    nullptr};
}

template <typename A>
ActorClass ActorRegistry::ClassOf(std::string name, KeyTable keys) {
  ActorClass cls = ClassOf<A>(std::move(name));
  cls.keys = std::make_shared<const KeyTable>(std::move(keys));
  return cls;
}

}  // namespace tandem

// Registers actor class `Type` at program (or plugin) load: TANDEM_REGISTER_ACTOR(Type, name)
// or TANDEM_REGISTER_ACTOR(Type, name, key_table).
#define TANDEM_REGISTER_ACTOR(Type, ...)                                       \
  [[maybe_unused]] static const bool TANDEM_CONCAT(tandem_actor_registered_, \
                                                   __COUNTER__) =            \
      ::tandem::internal::RegisterActorAtStartup(                            \
          ::tandem::ActorRegistry::ClassOf<Type>(__VA_ARGS__))
