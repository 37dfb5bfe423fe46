/**
 * `punctual completion bash|zsh|fish` (API-3): a shell completion script generated from
 * the program's own command tree (commands, flags, flag choices), so it cannot drift from
 * the commands. `--json` prints that tree instead.
 */
import { Argument, type Command } from "commander";
import { CliError, EXIT_USAGE } from "./errors.js";
import { jsonText } from "./format.js";
import type { Io } from "./run.js";

/** One flag of a command. */
export interface FlagNode {
  /** `--dtstart` (and `-V` style short names when there are any). */
  long: string;
  short: string | null;
  /** Whether the flag reads a value (`--tzid <zone>`). */
  takesValue: boolean;
  /** The values it accepts, when closed (`--channel webhook|log|…`). */
  choices: string[] | null;
  description: string;
}

/** One command and its subcommands. */
export interface CommandNode {
  name: string;
  /** Words from the program down to this command, e.g. `["schedules", "add"]`. */
  path: string[];
  description: string;
  /** Positional arguments, e.g. `<id>`, `[file]`. */
  arguments: string[];
  /** The values the first positional argument accepts, when closed (`completion bash|zsh|fish`). */
  argumentChoices: string[] | null;
  flags: FlagNode[];
  commands: CommandNode[];
}

/** The shells a script is generated for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** The tree of `cmd` (the program: path `[]`), hidden commands left out, `help` flags included. */
export function commandTree(cmd: Command, path: string[] = []): CommandNode {
  const flags: FlagNode[] = cmd.options
    .filter((o) => !o.hidden && o.long)
    .map((o) => ({
      long: o.long!,
      short: o.short ?? null,
      takesValue: o.required || o.optional,
      choices: o.argChoices ? [...o.argChoices] : null,
      description: o.description,
    }));
  flags.push({
    long: "--help",
    short: "-h",
    takesValue: false,
    choices: null,
    description: "show help",
  });
  return {
    name: path.length === 0 ? cmd.name() : path[path.length - 1]!,
    path,
    description: cmd.description(),
    arguments: cmd.registeredArguments.map((a) => (a.required ? `<${a.name()}>` : `[${a.name()}]`)),
    argumentChoices: cmd.registeredArguments[0]?.argChoices
      ? [...cmd.registeredArguments[0].argChoices]
      : null,
    flags,
    commands: cmd.commands
      .filter((c) => !(c as Command & { _hidden?: boolean })._hidden)
      .map((c) => commandTree(c, [...path, c.name()])),
  };
}

/** Every node of the tree, depth first (the root first). */
export function allNodes(node: CommandNode): CommandNode[] {
  return [node, ...node.commands.flatMap(allNodes)];
}

/** A single-quoted shell word (`'` written as `'\''`). */
const sq = (s: string): string => `'${s.replace(/'/g, "'\\''")}'`;

/** One line of text: descriptions in scripts must not break lines or quotes. */
const oneLine = (s: string): string => s.replace(/\s+/g, " ").trim();

function bashScript(root: CommandNode): string {
  const nodes = allNodes(root);
  const cases = (pick: (n: CommandNode) => string) =>
    nodes.map((n) => `    ${sq(n.path.join(" "))}) echo ${sq(pick(n))} ;;`).join("\n");
  const choiceCases = nodes
    .flatMap((n) =>
      n.flags
        .filter((f) => f.choices)
        .map(
          (f) => `    ${sq(`${n.path.join(" ")}|${f.long}`)}) echo ${sq(f.choices!.join(" "))} ;;`,
        ),
    )
    .join("\n");
  const valued = (n: CommandNode) =>
    n.flags
      .filter((f) => f.takesValue)
      .flatMap((f) => [f.long, ...(f.short ? [f.short] : [])])
      .join(" ");
  return `# bash completion for ${root.name} (generated from its commands: \`${root.name} completion bash\`)
# Load it in this shell:   source <(${root.name} completion bash)
# Or install it:           ${root.name} completion bash > ~/.local/share/bash-completion/completions/${root.name}

_${root.name}_subcommands() {
  case "$1" in
${cases((n) => n.commands.map((c) => c.name).join(" "))}
  esac
}

_${root.name}_arguments() {
  case "$1" in
${nodes
  .filter((n) => n.argumentChoices)
  .map((n) => `    ${sq(n.path.join(" "))}) echo ${sq(n.argumentChoices!.join(" "))} ;;`)
  .join("\n")}
  esac
}

_${root.name}_flags() {
  case "$1" in
${cases((n) => n.flags.flatMap((f) => [f.long, ...(f.short ? [f.short] : [])]).join(" "))}
  esac
}

_${root.name}_valued_flags() {
  case "$1" in
${cases(valued)}
  esac
}

_${root.name}_choices() {
  case "$1" in
${choiceCases}
  esac
}

_${root.name}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" i w skip=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    case "$w" in
      --*=*) continue ;;
      -*)
        case " $(_${root.name}_valued_flags "$path") " in *" $w "*) skip=1 ;; esac
        continue ;;
    esac
    case " $(_${root.name}_subcommands "$path") " in
      *" $w "*) path="\${path:+$path }$w" ;;
    esac
  done
  if ((skip)); then
    local prev="\${COMP_WORDS[COMP_CWORD-1]}" choices
    choices="$(_${root.name}_choices "$path|$prev")"
    if [[ -n "$choices" ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$choices" -- "$cur")
    else
      COMPREPLY=()
    fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_${root.name}_flags "$path")" -- "$cur")
    return 0
  fi
  mapfile -t COMPREPLY < <(compgen -W "$(_${root.name}_subcommands "$path") $(_${root.name}_arguments "$path")" -- "$cur")
  return 0
}

complete -o default -F _${root.name} ${root.name}
`;
}

function zshScript(root: CommandNode): string {
  const nodes = allNodes(root);
  /** One `case` arm a node: `'<path>') <name>=(<words>) ;;`, each word single-quoted. */
  const cases = (of: readonly CommandNode[], name: string, words: (n: CommandNode) => string[]) =>
    of
      .map((n) => `    ${sq(n.path.join(" "))}) ${name}=(${words(n).map(sq).join(" ")}) ;;`)
      .join("\n");
  /** `name:description`, the colon of the description escaped (zsh `_describe`). */
  const described = (name: string, description: string) =>
    `${name}:${oneLine(description).replace(/:/g, "\\:")}`;
  const describeCases = cases(
    nodes.filter((n) => n.commands.length > 0),
    "subs",
    (n) => n.commands.map((c) => described(c.name, c.description)),
  );
  const flagCases = cases(nodes, "flags", (n) =>
    n.flags.map((f) => described(f.long, f.description)),
  );
  const valuedCases = cases(nodes, "valued", (n) =>
    n.flags.filter((f) => f.takesValue).map((f) => f.long),
  );
  const choiceCases = nodes
    .flatMap((n) =>
      n.flags
        .filter((f) => f.choices)
        .map(
          (f) =>
            `    ${sq(`${n.path.join(" ")}|${f.long}`)}) choices=(${f.choices!.map(sq).join(" ")}) ;;`,
        ),
    )
    .join("\n");
  return `#compdef ${root.name}
# zsh completion for ${root.name} (generated from its commands: \`${root.name} completion zsh\`)
# Load it in this shell:   source <(${root.name} completion zsh)
# Or install it:           ${root.name} completion zsh > "\${fpath[1]}/_${root.name}"

_${root.name}() {
  local path_="" w skip=0 i
  local -a subs flags valued choices
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    if ((skip)); then skip=0; continue; fi
    if [[ "$w" == --*=* ]]; then continue; fi
    if [[ "$w" == -* ]]; then
      valued=()
      case "$path_" in
${valuedCases}
      esac
      if ((\${valued[(Ie)$w]})); then skip=1; fi
      continue
    fi
    subs=()
    case "$path_" in
${describeCases}
    esac
    if ((\${subs[(I)$w:*]})); then path_="\${path_:+$path_ }$w"; fi
  done
  if ((skip)); then
    choices=()
    case "$path_|\${words[CURRENT-1]}" in
${choiceCases}
    esac
    if ((\${#choices})); then compadd -a choices; else _files; fi
    return
  fi
  if [[ "\${words[CURRENT]}" == -* ]]; then
    flags=()
    case "$path_" in
${flagCases}
    esac
    _describe -t flags 'flag' flags
    return
  fi
  subs=()
  case "$path_" in
${describeCases}
  esac
  choices=()
  case "$path_" in
${nodes
  .filter((n) => n.argumentChoices)
  .map((n) => `    ${sq(n.path.join(" "))}) choices=(${n.argumentChoices!.map(sq).join(" ")}) ;;`)
  .join("\n")}
  esac
  if ((\${#subs})); then _describe -t commands 'command' subs
  elif ((\${#choices})); then compadd -a choices
  else _files; fi
}

if [[ "\${funcstack[1]}" == "_${root.name}" ]]; then
  _${root.name} "$@"
else
  compdef _${root.name} ${root.name}
fi
`;
}

function fishScript(root: CommandNode): string {
  const lines: string[] = [
    `# fish completion for ${root.name} (generated from its commands: \`${root.name} completion fish\`)`,
    `# Load it in this shell:   ${root.name} completion fish | source`,
    `# Or install it:           ${root.name} completion fish > ~/.config/fish/completions/${root.name}.fish`,
    "",
    `complete -c ${root.name} -f`,
  ];
  for (const n of allNodes(root)) {
    // The condition that the words so far name exactly this command.
    const names = n.commands.map((c) => c.name).join(" ");
    const at =
      n.path.length === 0
        ? "__fish_use_subcommand"
        : n.path.map((p) => `__fish_seen_subcommand_from ${p}`).join("; and ");
    const here =
      names.length > 0 && n.path.length > 0
        ? `${at}; and not __fish_seen_subcommand_from ${names}`
        : at;
    for (const c of n.commands) {
      lines.push(
        `complete -c ${root.name} -n ${sq(here)} -a ${sq(c.name)} -d ${sq(oneLine(c.description).slice(0, 120))}`,
      );
    }
    // Completion of file names is off (`-f` above) except where a command reads a file.
    if (n.arguments.some((a) => /file/i.test(a))) {
      lines.push(`complete -c ${root.name} -n ${sq(here)} -F`);
    }
    if (n.argumentChoices) {
      lines.push(`complete -c ${root.name} -n ${sq(here)} -a ${sq(n.argumentChoices.join(" "))}`);
    }
    const flagCondition = n.path.length === 0 ? "__fish_use_subcommand" : here;
    for (const f of n.flags) {
      const parts = [`complete -c ${root.name} -n ${sq(flagCondition)} -l ${f.long.slice(2)}`];
      if (f.short) parts.push(`-s ${f.short.slice(1)}`);
      if (f.takesValue) parts.push(f.choices ? `-x -a ${sq(f.choices.join(" "))}` : "-r -F");
      parts.push(`-d ${sq(oneLine(f.description).slice(0, 120))}`);
      lines.push(parts.join(" "));
    }
  }
  return `${lines.join("\n")}\n`;
}

/** The completion script of `shell` for the program `root` (its tree). */
export function completionScript(root: CommandNode, shell: Shell): string {
  switch (shell) {
    case "bash":
      return bashScript(root);
    case "zsh":
      return zshScript(root);
    case "fish":
      return fishScript(root);
  }
}

/** Adds `completion [shell]` to `program`; the script is made from `program` when it runs. */
export function addCompletionCommand(
  program: Command,
  kit: { io: Io; example: (lines: string[]) => string },
): void {
  const { io, example } = kit;
  program
    .command("completion")
    .description(
      "Print a shell completion script (bash, zsh or fish) made from the commands themselves.",
    )
    .addArgument(new Argument("[shell]", "bash, zsh or fish").choices(SHELLS))
    .option("--json", "print the command tree the scripts are made from, as JSON", false)
    .addHelpText(
      "after",
      example([
        "source <(punctual completion bash)",
        'punctual completion zsh > "${fpath[1]}/_punctual"',
        "punctual completion fish > ~/.config/fish/completions/punctual.fish",
      ]),
    )
    .action((shell: Shell | undefined, flags: { json?: boolean }) => {
      const tree = commandTree(program);
      if (flags.json) return io.out(jsonText(tree));
      if (shell === undefined) {
        throw new CliError(
          `Name a shell: punctual completion ${SHELLS.join("|")} (or --json for the command tree).`,
          EXIT_USAGE,
        );
      }
      io.out(completionScript(tree, shell));
    });
}
