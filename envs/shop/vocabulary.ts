// The words the shop catalogue is built from. Every list is chosen so that WebShop's
// fuzzy matcher (token_set_ratio > 85) never confuses two attributes of one product
// type or two values of one option group, and so that no option value appears inside
// a product's own text (WebShop counts such a hit as a matched option); the shop tests
// check both properties over the whole generated catalogue.

export interface ProductType {
  /** The search query WebShop's products were scraped under; equal queries mean equal types. */
  query: string;
  /** Shown in titles. */
  display: string;
  /** The title nouns spaCy would tag in WebShop, apart from the brand. */
  nouns: readonly string[];
  /** Second level of the product category path. */
  subcategory: string;
  attributes: readonly string[];
  /** Option group name to the values a product of this type may offer. */
  options: Readonly<Record<string, readonly string[]>>;
  /** Price range in dollars. */
  price: readonly [number, number];
}

export interface Category {
  /** The task type: names the skill card and the per-type metrics. */
  slug: string;
  name: string;
  brands: readonly string[];
  types: readonly ProductType[];
}

const COLORS = ['black', 'white', 'navy', 'pink', 'green', 'purple', 'gray', 'beige', 'brown', 'yellow', 'teal', 'silver', 'blue', 'burgundy'];
const APPAREL_SIZES = ['small', 'medium', 'large', 'x-large', 'xx-large'];
const SHOE_SIZES = ['6', '7', '8', '9', '10', '11', '12'];
const PHONES = ['iphone 13', 'galaxy s23', 'pixel 8', 'oneplus 11', 'moto edge'];

/** Color values are normalised before matching, as WebShop's normalize_color does. */
export const COLOR_SET: readonly string[] = COLORS;

/** WebShop matches these option groups exactly; every other group is matched fuzzily. */
export const EXACT_MATCH_OPTIONS: readonly string[] = ['size'];

export const CATEGORIES: readonly Category[] = [
  {
    slug: 'phone_accessories',
    name: 'Cell Phones & Accessories',
    brands: ['Lumora', 'Kestrix', 'Voltana', 'Orbisk', 'Nexilo', 'Cadenza', 'Pivora', 'Quillon'],
    types: [
      {
        query: 'phone case', display: 'Phone Case', nouns: ['phone', 'case'], subcategory: 'Cases & Covers',
        attributes: ['shockproof', 'slim fit', 'wireless charging compatible', 'raised edges', 'non fading', 'drop protection', 'scratch resistant', 'soft grip'],
        options: { color: COLORS.slice(0, 10), 'compatible phone': PHONES }, price: [6, 38],
      },
      {
        query: 'screen protector', display: 'Screen Protector', nouns: ['screen', 'protector'], subcategory: 'Screen Protectors',
        attributes: ['tempered glass', 'bubble free', 'case friendly', 'easy installation', 'privacy filter', 'high definition', 'anti fingerprint', 'edge to edge'],
        options: { 'compatible phone': PHONES, size: ['1 pack', '2 pack', '3 pack'] }, price: [5, 24],
      },
      {
        query: 'charging cable', display: 'Charging Cable', nouns: ['charging', 'cable'], subcategory: 'Cables',
        attributes: ['fast charging', 'braided nylon', 'usb c', 'tangle free', 'data sync', 'reinforced connectors', 'heat resistant', 'bend tested'],
        options: { color: ['black', 'white', 'gray', 'blue', 'pink'], length: ['3 ft', '6 ft', '10 ft'] }, price: [4, 22],
      },
      {
        query: 'wireless charger', display: 'Wireless Charger', nouns: ['wireless', 'charger'], subcategory: 'Chargers & Power Adapters',
        attributes: ['fast charging', 'led indicator', 'overheat protection', 'non slip pad', 'foldable stand', 'travel friendly', 'quiet operation', 'case compatible'],
        options: { color: ['black', 'white', 'gray', 'navy', 'beige'] }, price: [12, 45],
      },
      {
        query: 'phone stand', display: 'Phone Stand', nouns: ['phone', 'stand'], subcategory: 'Stands & Mounts',
        attributes: ['adjustable angle', 'non slip pad', 'foldable design', 'aluminum alloy', 'heavy duty', 'desk friendly', 'portable', 'cable hole'],
        options: { color: ['black', 'silver', 'gray', 'pink', 'blue'] }, price: [7, 32],
      },
    ],
  },
  {
    slug: 'clothing',
    name: 'Clothing',
    brands: ['Aldermoor', 'Fennick', 'Solvane', 'Marwick', 'Tessaly', 'Oakhurst', 'Brevin', 'Calloway'],
    types: [
      {
        query: 't-shirt', display: 'T-Shirt', nouns: ['shirt'], subcategory: 'Tops & Tees',
        attributes: ['machine wash', 'short sleeve', 'crew neck', 'cotton blend', 'relaxed fit', 'moisture wicking', 'tagless collar', 'pre shrunk'],
        options: { color: COLORS.slice(0, 12), size: APPAREL_SIZES }, price: [8, 30],
      },
      {
        query: 'hoodie', display: 'Hoodie', nouns: ['hoodie'], subcategory: 'Sweatshirts & Hoodies',
        attributes: ['fleece lined', 'kangaroo pocket', 'drawstring hood', 'machine wash', 'long sleeve', 'relaxed fit', 'ribbed cuffs', 'brushed interior'],
        options: { color: COLORS.slice(0, 12), size: APPAREL_SIZES }, price: [18, 55],
      },
      {
        query: 'jeans', display: 'Jeans', nouns: ['jeans'], subcategory: 'Jeans',
        attributes: ['stretch denim', 'slim fit', 'button closure', 'five pocket', 'machine wash', 'mid rise', 'tapered leg', 'fade resistant'],
        options: { color: ['black', 'blue', 'gray', 'navy'], size: ['28', '30', '32', '34', '36', '38'] }, price: [22, 70],
      },
      {
        query: 'dress', display: 'Dress', nouns: ['dress'], subcategory: 'Dresses',
        attributes: ['flowy silhouette', 'knee length', 'sleeveless', 'pleated skirt', 'lightweight fabric', 'hidden zipper', 'machine wash', 'v neck'],
        options: { color: COLORS.slice(0, 12), size: APPAREL_SIZES }, price: [20, 80],
      },
      {
        query: 'rain jacket', display: 'Rain Jacket', nouns: ['rain', 'jacket'], subcategory: 'Coats & Jackets',
        attributes: ['waterproof', 'packable', 'adjustable hood', 'zip pockets', 'breathable fabric', 'windproof', 'taped seams', 'lightweight'],
        options: { color: ['black', 'navy', 'green', 'yellow', 'gray', 'teal'], size: APPAREL_SIZES }, price: [28, 95],
      },
    ],
  },
  {
    slug: 'footwear',
    name: 'Shoes',
    brands: ['Stridewell', 'Ferrano', 'Hollin', 'Trekwise', 'Pavlo', 'Ambleside', 'Corvetti', 'Dunmore'],
    types: [
      {
        query: 'running shoes', display: 'Running Shoes', nouns: ['running', 'shoes'], subcategory: 'Athletic Shoes',
        attributes: ['breathable mesh', 'cushioned sole', 'lightweight', 'arch support', 'non slip', 'shock absorbing', 'lace up', 'reflective details'],
        options: { color: COLORS.slice(0, 8), size: SHOE_SIZES }, price: [30, 120],
      },
      {
        query: 'hiking boots', display: 'Hiking Boots', nouns: ['hiking', 'boots'], subcategory: 'Boots',
        attributes: ['waterproof', 'ankle support', 'rubber outsole', 'padded collar', 'all terrain', 'lace up', 'insulated lining', 'durable leather'],
        options: { color: ['brown', 'black', 'gray', 'green', 'beige'], size: SHOE_SIZES }, price: [45, 160],
      },
      {
        query: 'sandals', display: 'Sandals', nouns: ['sandals'], subcategory: 'Sandals',
        attributes: ['open toe', 'adjustable strap', 'cushioned footbed', 'quick dry', 'non slip', 'arch support', 'lightweight', 'beach ready'],
        options: { color: ['black', 'brown', 'beige', 'white', 'navy', 'pink'], size: SHOE_SIZES }, price: [12, 60],
      },
      {
        query: 'slippers', display: 'Slippers', nouns: ['slippers'], subcategory: 'Slippers',
        attributes: ['memory foam', 'plush lining', 'indoor outdoor', 'non slip', 'machine washable', 'warm fleece', 'anti skid', 'cozy fit'],
        options: { color: ['gray', 'pink', 'navy', 'beige', 'brown', 'purple'], size: SHOE_SIZES }, price: [10, 45],
      },
      {
        query: 'sneakers', display: 'Sneakers', nouns: ['sneakers'], subcategory: 'Fashion Sneakers',
        attributes: ['canvas upper', 'rubber sole', 'lace up', 'padded insole', 'classic design', 'low top', 'breathable lining', 'easy to clean'],
        options: { color: COLORS.slice(0, 10), size: SHOE_SIZES }, price: [25, 95],
      },
    ],
  },
  {
    slug: 'beauty',
    name: 'Beauty & Personal Care',
    brands: ['Velisse', 'Aurenne', 'Mirabel', 'Cosmara', 'Lunette', 'Petrova', 'Selvane', 'Oriella'],
    types: [
      {
        query: 'face moisturizer', display: 'Face Moisturizer', nouns: ['face', 'moisturizer'], subcategory: 'Skin Care',
        attributes: ['fragrance free', 'hyaluronic acid', 'non greasy', 'long lasting', 'dermatologist tested', 'oil free', 'sensitive skin', 'cruelty free'],
        options: { size: ['1.7 fl oz', '3.4 fl oz', '6 fl oz'] }, price: [9, 48],
      },
      {
        query: 'lipstick', display: 'Lipstick', nouns: ['lipstick'], subcategory: 'Makeup',
        attributes: ['long lasting', 'matte finish', 'moisturizing', 'highly pigmented', 'smudge proof', 'cruelty free', 'vitamin e', 'creamy texture'],
        options: { color: ['coral', 'berry', 'nude', 'plum', 'ruby', 'mauve'] }, price: [6, 32],
      },
      {
        query: 'shampoo', display: 'Shampoo', nouns: ['shampoo'], subcategory: 'Hair Care',
        attributes: ['sulfate free', 'paraben free', 'color safe', 'volumizing', 'natural ingredients', 'dandruff control', 'salon quality', 'gentle formula'],
        options: { scent: ['lavender', 'citrus', 'coconut', 'unscented', 'eucalyptus'], size: ['8 fl oz', '16 fl oz', '32 fl oz'] }, price: [5, 36],
      },
      {
        query: 'sunscreen', display: 'Sunscreen', nouns: ['sunscreen'], subcategory: 'Sun Care',
        attributes: ['spf 50', 'water resistant', 'reef safe', 'broad spectrum', 'non greasy', 'mineral based', 'fast absorbing', 'sensitive skin'],
        options: { size: ['2 fl oz', '5 fl oz', '10 fl oz'] }, price: [7, 34],
      },
      {
        query: 'nail polish', display: 'Nail Polish', nouns: ['nail', 'polish'], subcategory: 'Nail Care',
        attributes: ['quick dry', 'chip resistant', 'high shine', 'long lasting', 'vegan formula', 'gel effect', 'easy application', 'non toxic'],
        options: { color: ['coral', 'berry', 'nude', 'plum', 'ruby', 'mauve', 'teal', 'silver'] }, price: [4, 22],
      },
    ],
  },
  {
    slug: 'grocery',
    name: 'Grocery & Gourmet Food',
    brands: ['Harvestly', 'Brookfarm', 'Tillwell', 'Goldmeadow', 'Pantrico', 'Orchardine', 'Millbrae', 'Saffrona'],
    types: [
      {
        query: 'green tea', display: 'Green Tea', nouns: ['green', 'tea'], subcategory: 'Tea',
        attributes: ['caffeine free', 'organic', 'loose leaf', 'antioxidant rich', 'non gmo', 'individually wrapped', 'kosher', 'hand picked'],
        options: { flavor: ['jasmine', 'mint', 'lemon', 'honey', 'original'], size: ['20 count', '40 count', '100 count'] }, price: [4, 28],
      },
      {
        query: 'coffee beans', display: 'Coffee Beans', nouns: ['coffee', 'beans'], subcategory: 'Coffee',
        attributes: ['whole bean', 'medium roast', 'single origin', 'fair trade', 'low acid', 'small batch', 'organic', 'rich aroma'],
        options: { flavor: ['original', 'hazelnut', 'vanilla', 'caramel', 'mocha'], size: ['12 ounce', '2 pound', '5 pound'] }, price: [8, 55],
      },
      {
        query: 'protein bar', display: 'Protein Bar', nouns: ['protein', 'bar'], subcategory: 'Snack Bars',
        attributes: ['high protein', 'gluten free', 'low sugar', 'keto friendly', 'non gmo', 'plant based', 'individually wrapped', 'no artificial sweeteners'],
        options: { flavor: ['chocolate', 'peanut butter', 'cookie dough', 'almond', 'cinnamon'], size: ['pack of 6', 'pack of 12', 'pack of 24'] }, price: [9, 45],
      },
      {
        query: 'trail mix', display: 'Trail Mix', nouns: ['trail', 'mix'], subcategory: 'Nuts & Seeds',
        attributes: ['gluten free', 'non gmo', 'resealable bag', 'no added sugar', 'high fiber', 'roasted nuts', 'kosher', 'vegan'],
        options: { flavor: ['classic', 'tropical', 'cranberry', 'spicy', 'maple'], size: ['pack of 6', 'pack of 12', 'pack of 24'] }, price: [6, 35],
      },
      {
        query: 'olive oil', display: 'Olive Oil', nouns: ['olive', 'oil'], subcategory: 'Oils',
        attributes: ['extra virgin', 'cold pressed', 'first harvest', 'glass bottle', 'single estate', 'organic', 'unfiltered', 'low acidity'],
        options: { size: ['250 ml', '500 ml', '1 liter'] }, price: [8, 48],
      },
    ],
  },
  {
    slug: 'home_kitchen',
    name: 'Home & Kitchen',
    brands: ['Hearthly', 'Domina', 'Casavera', 'Nestwell', 'Kitchora', 'Lindholm', 'Tavola', 'Roomsby'],
    types: [
      {
        query: 'frying pan', display: 'Frying Pan', nouns: ['frying', 'pan'], subcategory: 'Cookware',
        attributes: ['nonstick coating', 'induction compatible', 'dishwasher safe', 'oven safe', 'stay cool handle', 'pfoa free', 'even heating', 'easy to clean'],
        options: { color: ['black', 'gray', 'blue', 'beige'], size: ['8 inch', '10 inch', '12 inch'] }, price: [14, 75],
      },
      {
        query: 'bath towel', display: 'Bath Towel', nouns: ['bath', 'towel'], subcategory: 'Towels',
        attributes: ['quick dry', 'highly absorbent', 'soft cotton', 'machine washable', 'fade resistant', 'lint free', 'plush texture', 'hotel quality'],
        options: { color: COLORS.slice(0, 12), size: ['small', 'standard', 'oversized'] }, price: [8, 40],
      },
      {
        query: 'throw pillow', display: 'Throw Pillow', nouns: ['throw', 'pillow'], subcategory: 'Decorative Pillows',
        attributes: ['hidden zipper', 'soft velvet', 'removable cover', 'machine washable', 'decorative', 'hypoallergenic fill', 'fade resistant', 'square shape'],
        options: { color: COLORS.slice(0, 12), size: ['16 x 16 inch', '18 x 18 inch', '20 x 20 inch'] }, price: [9, 38],
      },
      {
        query: 'storage bins', display: 'Storage Bins', nouns: ['storage', 'bins'], subcategory: 'Storage & Organization',
        attributes: ['collapsible', 'sturdy handles', 'stackable', 'fabric lined', 'easy to clean', 'space saving', 'lidded', 'lightweight'],
        options: { color: ['gray', 'beige', 'white', 'navy', 'teal'], size: ['small', 'medium', 'large'] }, price: [10, 42],
      },
      {
        query: 'coffee mug', display: 'Coffee Mug', nouns: ['coffee', 'mug'], subcategory: 'Drinkware',
        attributes: ['dishwasher safe', 'microwave safe', 'ceramic', 'large capacity', 'lead free', 'heat resistant', 'gift ready', 'comfortable handle'],
        options: { color: COLORS.slice(0, 10), size: ['11 oz', '15 oz', '20 oz'] }, price: [6, 28],
      },
    ],
  },
];

/** Neutral sentences for descriptions: they name no attribute and no option value. */
export const DESCRIPTION_LINES: readonly string[] = [
  'Made to be used every day and to hold up over time.',
  'Backed by a friendly customer service team.',
  'A thoughtful choice for yourself or as a present.',
  'Thoughtfully made with attention to detail.',
  'Ships in simple recyclable packaging.',
  'Designed with input from real customers.',
];

/** Benefits that close a feature bullet. */
export const BENEFITS: readonly string[] = [
  'everyday comfort', 'peace of mind', 'years of use', 'a better routine', 'busy mornings', 'home or travel',
];

export const REVIEWS: readonly string[] = [
  'Exactly as described, would buy again.',
  'Good value for the money.',
  'Arrived quickly and works as expected.',
  'Nice quality, my family loves it.',
  'Does the job, no complaints.',
  'Better than I expected for the price.',
];
