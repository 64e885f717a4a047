// The command grammar: which commands are admissible in a state (listed as ALFWorld
// lists them, sorted) and what each one does. A command runs only when it is
// admissible; anything else answers "Nothing happens." and changes nothing. With
// `fullCommands` the set also holds what ALFWorld admits besides (`examine` on the
// objects in view, `help`); by default it does not, which is the set the bundled
// model was trained on.

import { OBJECTS } from './catalog.ts';
import { arriveText, describeReceptacle, examineItemText, HELP_TEXT, inventoryText, lookText, NOTHING_HAPPENS, openText } from './text.ts';
import { held, isReachable, item, itemsIn, receptacle, type Item, type World } from './world.ts';

/** ALFWorld's canContain, read from where each object kind may be placed. */
export function canContain(receptacleType: string, o: Item): boolean {
  return OBJECTS[o.type]?.places.includes(receptacleType) ?? false;
}

const TRANSFORMS = [
  { verb: 'heat', appliance: 'microwave', able: (o: Item) => OBJECTS[o.type]?.heat === true },
  { verb: 'cool', appliance: 'fridge', able: (o: Item) => OBJECTS[o.type]?.cool === true },
  { verb: 'clean', appliance: 'sinkbasin', able: (o: Item) => OBJECTS[o.type]?.clean === true },
] as const;

export interface CommandSet {
  /** Also `examine` every object in view and `help`, as ALFWorld admits them. */
  fullCommands?: boolean;
}

export function admissibleCommands(w: World, set: CommandSet = {}): string[] {
  const out = ['inventory', 'look'];
  if (set.fullCommands) out.push('help');
  for (const r of w.receptacles) if (r.name !== w.at) out.push(`go to ${r.name}`);
  const hand = held(w);
  if (hand) out.push(`examine ${hand.name}`);
  const here = w.at === null ? undefined : receptacle(w, w.at);
  if (here) {
    out.push(`examine ${here.name}`);
    if (here.openable) out.push(`${here.open ? 'close' : 'open'} ${here.name}`);
    if (isReachable(here)) {
      for (const o of itemsIn(w, here.name)) {
        if (o.pickupable && !hand) out.push(`take ${o.name} from ${here.name}`);
        if (o.toggleable) out.push(`use ${o.name}`);
        if (set.fullCommands) out.push(`examine ${o.name}`);
      }
      if (hand && canContain(here.type, hand)) out.push(`move ${hand.name} to ${here.name}`);
    }
    if (hand) {
      for (const t of TRANSFORMS) {
        if (here.type === t.appliance && t.able(hand)) out.push(`${t.verb} ${hand.name} with ${here.name}`);
      }
    }
  }
  return out.sort();
}

/** Lower-case, trimmed, single-spaced: the form admissible commands are written in. */
export function normalizeCommand(command: string): string {
  return command.trim().toLowerCase().replace(/\s+/g, ' ');
}

/** Runs one command against the world (mutating it) and returns the feedback text. */
export function execute(w: World, command: string, set: CommandSet = {}): string {
  const cmd = normalizeCommand(command);
  if (!admissibleCommands(w, set).includes(cmd)) return NOTHING_HAPPENS;
  if (cmd === 'look') return lookText(w);
  if (cmd === 'help') return HELP_TEXT;
  if (cmd === 'inventory') return inventoryText(held(w));
  let m: RegExpMatchArray | null;
  if ((m = cmd.match(/^go to (.+)$/))) {
    const r = receptacle(w, m[1])!;
    w.at = r.name;
    return arriveText(w, r);
  }
  if ((m = cmd.match(/^open (.+)$/))) {
    const r = receptacle(w, m[1])!;
    r.open = true;
    return openText(w, r);
  }
  if ((m = cmd.match(/^close (.+)$/))) {
    receptacle(w, m[1])!.open = false;
    return `You close the ${m[1]}.`;
  }
  if ((m = cmd.match(/^take (.+) from (.+)$/))) {
    item(w, m[1])!.in = null;
    w.holding = m[1];
    return `You pick up the ${m[1]} from the ${m[2]}.`;
  }
  if ((m = cmd.match(/^move (.+) to (.+)$/))) {
    item(w, m[1])!.in = m[2];
    w.holding = null;
    return `You move the ${m[1]} to the ${m[2]}.`;
  }
  if ((m = cmd.match(/^examine (.+)$/))) {
    const r = receptacle(w, m[1]);
    return r ? describeReceptacle(w, r) : examineItemText(item(w, m[1])!);
  }
  if ((m = cmd.match(/^use (.+)$/))) {
    item(w, m[1])!.on = true;
    return `You turn on the ${m[1]}.`;
  }
  if ((m = cmd.match(/^(heat|cool|clean) (.+) with (.+)$/))) {
    const o = item(w, m[2])!;
    if (m[1] === 'heat') [o.hot, o.cool] = [true, false];
    else if (m[1] === 'cool') [o.cool, o.hot] = [true, false];
    else o.clean = true;
    return `You ${m[1]} the ${m[2]} using the ${m[3]}.`;
  }
  throw new Error(`household: admissible command "${cmd}" has no handler`);
}
