// Where things are kept in these homes. Each object kind has usual places, in order
// of preference: a world puts most copies of a kind at the first of them its room
// has, the rest anywhere the kind fits. The agent's prompt never says so; the skill
// cards do. This is the privileged knowledge a teacher with the cards has and a
// student without them must learn, so it must matter: searching the usual place
// first finds most objects in one or two steps instead of a walk through the room.

import { LAMPS, OBJECTS } from './catalog.ts';

/** Object and lamp kinds to their usual receptacle types, most preferred first. */
export const USUAL_PLACES: Readonly<Record<string, readonly string[]>> = {
  apple: ['fridge'],
  egg: ['fridge'],
  potato: ['countertop'],
  tomato: ['diningtable', 'countertop'],
  lettuce: ['fridge'],
  bread: ['diningtable', 'countertop'],
  mug: ['coffeemachine', 'desk', 'sidetable'],
  cup: ['sinkbasin'],
  plate: ['diningtable', 'shelf', 'coffeetable'],
  bowl: ['shelf', 'countertop', 'coffeetable'],
  pan: ['stoveburner'],
  pot: ['stoveburner'],
  kettle: ['countertop'],
  fork: ['drawer'],
  spoon: ['drawer'],
  knife: ['countertop'],
  butterknife: ['countertop'],
  spatula: ['sinkbasin'],
  ladle: ['diningtable', 'countertop'],
  dishsponge: ['sinkbasin'],
  saltshaker: ['diningtable', 'countertop'],
  peppershaker: ['diningtable', 'countertop'],
  winebottle: ['fridge'],
  glassbottle: ['garbagecan'],
  soapbottle: ['toilet', 'countertop'],
  soapbar: ['bathtubbasin', 'sinkbasin'],
  cloth: ['laundryhamper', 'countertop', 'dresser', 'shelf'],
  spraybottle: ['toilet'],
  toiletpaper: ['toiletpaperhanger'],
  candle: ['countertop'],
  handtowel: ['handtowelholder'],
  towel: ['towelholder'],
  tissuebox: ['countertop', 'sidetable'],
  alarmclock: ['sidetable'],
  book: ['bed', 'sofa'],
  cd: ['shelf'],
  cellphone: ['desk', 'coffeetable', 'sidetable'],
  creditcard: ['dresser', 'desk', 'armchair'],
  keychain: ['sidetable'],
  laptop: ['desk', 'sofa', 'bed'],
  pen: ['desk', 'dresser', 'drawer'],
  pencil: ['desk', 'dresser', 'drawer'],
  pillow: ['sofa', 'bed'],
  teddybear: ['bed'],
  box: ['sofa'],
  remotecontrol: ['coffeetable'],
  newspaper: ['armchair'],
  statue: ['tvstand', 'dresser'],
  vase: ['shelf', 'diningtable'],
  watch: ['sidetable'],
  desklamp: ['sidetable'],
};

/** Chance that a copy of a kind starts at its usual place, when its room has one it may start in. */
export const USUAL_PLACE_SHARE = 0.8;

/** Receptacle types a kind may occupy at all. */
export function allowedPlaces(kind: string): readonly string[] {
  const places = OBJECTS[kind]?.places ?? LAMPS[kind]?.places;
  if (places === undefined) throw new Error(`household: "${kind}" is neither an object nor a lamp kind`);
  return places;
}

/** The usual places of a kind. */
export function usualPlaces(kind: string): readonly string[] {
  const usual = USUAL_PLACES[kind];
  if (usual === undefined) throw new Error(`household: no usual place for "${kind}"`);
  return usual;
}

/** The first usual place of `kind` among the receptacle types `candidates` (null when none is there). */
export function usualPlaceAmong(kind: string, candidates: readonly string[]): string | null {
  return usualPlaces(kind).find((p) => candidates.includes(p)) ?? null;
}

/** How early a receptacle type comes in a search for `kind`: its usual places in order, then everything else. */
export function searchRank(kind: string, receptacleType: string): number {
  const i = usualPlaces(kind).indexOf(receptacleType);
  return i < 0 ? Number.MAX_SAFE_INTEGER : i;
}

