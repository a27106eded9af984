"""What the generated catalog sells: WebShop's five categories, their product types,
attribute vocabularies and option values.

Every product type names its search query (WebShop's ``query`` field: the term
a product was collected under), its Amazon-style category path (``product_category``,
segments joined by `` › ``), a price range, the words its titles use, the
attributes a product of that type may have (type-specific plus the category's
shared ones) and its option groups with their candidate values.

Types deliberately share nouns across categories (``green tea`` / ``tea tree
shampoo``, ``coffee beans`` / ``coffee table`` / ``coffee maker``, ``tuxedo
shirt`` / ``t-shirt``) so that a search term alone does not pin down a product.
Attribute vocabularies are chosen so that within one type no two
attributes fuzzy-match each other and none is a substring of another; the
tests check this, because otherwise a product missing an attribute would still
score it.
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES: tuple[str, ...] = ("beauty", "food", "fashion", "furniture", "electronics")


@dataclass(frozen=True)
class ProductType:
    """One kind of product a category sells.

    Attributes:
        type_id: stable identifier (``"tuxedo_shirt"``).
        category: one of ``CATEGORIES``.
        query: the search term products of this type were collected under.
        title_noun: the words a title uses for the type (``"Tuxedo Shirt"``).
        path: the ``product_category`` breadcrumb.
        price_range: (low, high) in dollars.
        attributes: type-specific attribute phrases (lower case).
        options: ``(option name, candidate values)`` groups.
        audience: optional title suffix (``"for Men"``).
    """

    type_id: str
    category: str
    query: str
    title_noun: str
    path: str
    price_range: tuple[float, float]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    audience: str = ""


def _t(type_id, category, query, title_noun, path, price_range, attributes, options,
       audience=""):
    return ProductType(type_id, category, query, title_noun, path, price_range,
                       tuple(attributes), tuple((n, tuple(v)) for n, v in options), audience)


_SHADES = ("natural black", "dark brown", "light brown", "blonde", "auburn", "burgundy")
_LIP_COLORS = ("nude", "red", "pink", "coral", "berry", "plum", "mauve")
_SCENTS = ("unscented", "lavender", "rose", "citrus", "cucumber", "vanilla", "coconut")
_APPAREL = ("black", "white", "navy", "grey", "b-blue", "red", "green", "beige", "khaki",
            "pink", "purple", "yellow")
_SIZES = ("small", "medium", "large", "x-large", "xx-large", "3x-large")
_WOOD = ("walnut", "black", "white", "oak", "espresso", "grey", "natural")
_GADGET = ("black", "white", "silver", "blue", "rose gold", "green", "red")

BEAUTY = "Beauty & Personal Care"
FOOD = "Grocery & Gourmet Food"
CLOTHES = "Clothing, Shoes & Jewelry"
HOME = "Home & Kitchen"

PRODUCT_TYPES: tuple[ProductType, ...] = (
    # BEAUTY
    _t("hair_extension", "beauty", "hair extensions", "Hair Extensions",
       f"{BEAUTY} › Hair Care › Hair Extensions, Wigs & Accessories › Hair Extensions",
       (8, 60), ["clip in", "natural looking", "heat resistant", "human hair", "thick hair",
                 "easy to apply"],
       [("color", _SHADES), ("size", ("14 inch", "20 inch", "26 inch"))]),
    _t("face_moisturizer", "beauty", "face moisturizer", "Face Moisturizer",
       f"{BEAUTY} › Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
       (9, 45), ["hyaluronic acid", "dry skin", "oil free", "anti aging", "fine lines",
                 "vitamin c"],
       [("size", ("1.7 ounce", "3.4 ounce")), ("scent", _SCENTS)]),
    _t("lipstick", "beauty", "lipstick", "Lipstick",
       f"{BEAUTY} › Makeup › Lips › Lipstick", (5, 30),
       ["matte finish", "long lasting", "moisturizing", "waterproof", "highly pigmented",
        "smudge proof"],
       [("color", _LIP_COLORS)]),
    _t("shampoo", "beauty", "tea tree shampoo", "Tea Tree Shampoo",
       f"{BEAUTY} › Hair Care › Shampoo & Conditioner › Shampoos", (6, 35),
       ["sulfate free", "argan oil", "dandruff", "color treated", "dry hair", "volumizing"],
       [("size", ("8 fl oz", "16 fl oz", "33.8 fl oz")), ("scent", _SCENTS)]),
    _t("nail_polish", "beauty", "nail polish", "Nail Polish",
       f"{BEAUTY} › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish", (4, 25),
       ["quick dry", "chip resistant", "gel effect", "non toxic", "high shine"],
       [("color", _LIP_COLORS + ("black", "white"))]),
    _t("eyeliner", "beauty", "eyeliner", "Eyeliner",
       f"{BEAUTY} › Makeup › Eyes › Eyeliner", (4, 28),
       ["waterproof", "smudge proof", "long lasting", "fine tip", "gel formula"],
       [("color", ("black", "brown", "navy", "green", "purple"))]),
    _t("body_lotion", "beauty", "body lotion", "Body Lotion",
       f"{BEAUTY} › Skin Care › Body › Moisturizers › Lotions", (6, 32),
       ["shea butter", "dry skin", "fragrance free", "non greasy", "cocoa butter",
        "sensitive skin"],
       [("scent", _SCENTS), ("size", ("8 fl oz", "16 fl oz", "32 fl oz"))]),
    _t("hair_mask", "beauty", "coconut oil hair mask", "Coconut Oil Hair Mask",
       f"{BEAUTY} › Hair Care › Hair & Scalp Treatments › Hair Masks", (8, 40),
       ["deep conditioning", "damaged hair", "keratin", "argan oil", "curly hair"],
       [("size", ("8 ounce", "16 ounce"))]),
    _t("perfume", "beauty", "perfume for women", "Perfume",
       f"{BEAUTY} › Fragrance › Women's › Eau de Parfum", (15, 120),
       ["eau de parfum", "floral scent", "long lasting", "gift set"],
       [("size", ("1 fl oz", "1.7 fl oz", "3.4 fl oz"))], audience="for Women"),
    _t("makeup_brush", "beauty", "makeup brush set", "Makeup Brush Set",
       f"{BEAUTY} › Tools & Accessories › Makeup Brushes & Tools › Brush Sets", (7, 45),
       ["synthetic bristles", "storage case", "foundation brush", "soft bristles",
        "eyeshadow brush"],
       [("color", ("rose gold", "black", "pink", "white", "purple"))]),
    # FOOD
    _t("green_tea", "food", "green tea", "Green Tea",
       f"{FOOD} › Beverages › Coffee, Tea & Cocoa › Tea › Green", (5, 30),
       ["tea bags", "loose leaf", "decaf", "matcha powder", "individually wrapped"],
       [("flavor name", ("original", "jasmine", "mint", "lemon", "honey", "ginger")),
        ("size", ("20 count", "100 count"))]),
    _t("coffee_beans", "food", "coffee beans", "Coffee Beans",
       f"{FOOD} › Beverages › Coffee, Tea & Cocoa › Coffee › Whole Coffee Beans", (8, 45),
       ["whole bean", "dark roast", "medium roast", "single origin", "fair trade", "arabica"],
       [("flavor name", ("original", "vanilla", "hazelnut", "mocha")),
        ("size", ("12 ounce", "2 pound"))]),
    _t("protein_bar", "food", "protein bars", "Protein Bars",
       f"{FOOD} › Snack Foods › Bars › Protein Bars", (12, 45),
       ["high protein", "low sugar", "keto friendly", "plant based", "whey isolate"],
       [("flavor name", ("chocolate", "peanut butter", "cookie dough", "almond", "berry")),
        ("size", ("single box", "variety pack"))]),
    _t("coconut_chips", "food", "coconut chips", "Coconut Chips",
       f"{FOOD} › Snack Foods › Chips & Crisps › Coconut Chips", (5, 25),
       ["unsweetened", "toasted", "vegan snack", "resealable bag", "paleo friendly"],
       [("flavor name", ("original", "sea salt", "chocolate", "caramel"))]),
    _t("olive_oil", "food", "extra virgin olive oil", "Extra Virgin Olive Oil",
       f"{FOOD} › Pantry Staples › Cooking Oils › Olive Oil", (9, 50),
       ["cold pressed", "glass bottle", "single origin", "first harvest", "high polyphenol"],
       [("size", ("500 ml", "1 liter"))]),
    _t("pasta_sauce", "food", "pasta sauce", "Pasta Sauce",
       f"{FOOD} › Pantry Staples › Sauces, Gravies & Marinades › Pasta Sauces", (4, 30),
       ["no sugar added", "low sodium", "keto friendly", "slow cooked", "italian tomatoes"],
       [("flavor name", ("marinara", "tomato basil", "arrabbiata", "roasted garlic"))]),
    _t("dark_chocolate", "food", "dark chocolate", "Dark Chocolate",
       f"{FOOD} › Snack Foods › Candy & Chocolate › Chocolate Bars", (5, 35),
       ["sugar free", "fair trade", "individually wrapped", "gift box", "high cacao"],
       [("flavor name", ("sea salt", "mint", "orange", "almond", "raspberry"))]),
    _t("trail_mix", "food", "trail mix", "Trail Mix",
       f"{FOOD} › Snack Foods › Trail Mix", (6, 30),
       ["resealable bag", "high protein", "no artificial flavors", "individually wrapped",
        "roasted nuts"],
       [("flavor name", ("sweet salty", "tropical", "dark chocolate", "honey roasted"))]),
    _t("herbal_tea", "food", "herbal tea", "Herbal Tea",
       f"{FOOD} › Beverages › Coffee, Tea & Cocoa › Tea › Herbal", (5, 28),
       ["caffeine free", "tea bags", "loose leaf", "sleep support", "immune support"],
       [("flavor name", ("chamomile", "peppermint", "rose", "hibiscus", "lemon ginger"))]),
    _t("beef_jerky", "food", "beef jerky", "Beef Jerky",
       f"{FOOD} › Meat & Seafood › Jerky & Dried Meats › Beef Jerky", (8, 45),
       ["high protein", "low fat", "grass fed", "resealable bag", "no msg"],
       [("flavor name", ("original", "teriyaki", "peppered", "sweet spicy"))]),
    # FASHION
    _t("tuxedo_shirt", "fashion", "men's tuxedo shirts", "Tuxedo Shirt",
       f"{CLOTHES} › Men › Clothing › Shirts › Tuxedo Shirts", (18, 70),
       ["slim fit", "regular fit", "long sleeve", "button closure", "polyester cotton",
        "wrinkle free"],
       [("color", _APPAREL), ("size", _SIZES)], audience="for Men"),
    _t("t_shirt", "fashion", "men's t-shirts", "T-Shirt",
       f"{CLOTHES} › Men › Clothing › Shirts › T-Shirts", (6, 30),
       ["short sleeve", "crew neck", "loose fit", "graphic print", "moisture wicking"],
       [("color", _APPAREL), ("size", _SIZES)], audience="for Men"),
    _t("running_shoes", "fashion", "running shoes", "Running Shoes",
       f"{CLOTHES} › Men › Shoes › Athletic › Running", (25, 120),
       ["non slip", "breathable mesh", "lightweight", "memory foam", "lace up",
        "arch support"],
       [("color", _APPAREL), ("size", ("7", "8", "9", "10", "11", "12"))], audience="for Men"),
    _t("leather_wallet", "fashion", "leather wallet", "Leather Wallet",
       f"{CLOTHES} › Men › Accessories › Wallets, Card Cases & Money Organizers › Wallets",
       (12, 60), ["rfid blocking", "genuine leather", "slim design", "bifold", "card slots"],
       [("color", ("black", "brown", "tan", "navy", "grey"))], audience="for Men"),
    _t("yoga_pants", "fashion", "yoga pants for women", "Yoga Pants",
       f"{CLOTHES} › Women › Clothing › Active › Active Pants › Yoga Pants", (12, 50),
       ["high waist", "tummy control", "four way stretch", "moisture wicking",
        "side pockets"],
       [("color", _APPAREL), ("size", _SIZES)], audience="for Women"),
    _t("wool_socks", "fashion", "wool socks", "Wool Socks",
       f"{CLOTHES} › Men › Clothing › Socks › Athletic Socks", (8, 35),
       ["merino wool", "cushioned sole", "moisture wicking", "crew length", "hiking"],
       [("color", _APPAREL), ("size", ("small", "medium", "large"))]),
    _t("rain_jacket", "fashion", "rain jacket for women", "Rain Jacket",
       f"{CLOTHES} › Women › Clothing › Coats, Jackets & Vests › Raincoats", (25, 110),
       ["waterproof", "hooded", "packable", "zipper closure", "windproof"],
       [("color", _APPAREL), ("size", _SIZES)], audience="for Women"),
    _t("sun_hat", "fashion", "sun hat for women", "Sun Hat",
       f"{CLOTHES} › Women › Accessories › Hats & Caps › Sun Hats", (9, 40),
       ["wide brim", "upf 50", "packable", "adjustable strap", "straw weave"],
       [("color", ("beige", "black", "khaki", "white", "pink"))], audience="for Women"),
    _t("maxi_dress", "fashion", "maxi dress", "Maxi Dress",
       f"{CLOTHES} › Women › Clothing › Dresses › Casual", (18, 75),
       ["v neck", "floral print", "high waist", "short sleeve", "side pockets"],
       [("color", _APPAREL), ("size", _SIZES)], audience="for Women"),
    _t("baseball_cap", "fashion", "baseball cap", "Baseball Cap",
       f"{CLOTHES} › Men › Accessories › Hats & Caps › Baseball Caps", (8, 30),
       ["adjustable strap", "cotton twill", "embroidered logo", "curved brim"],
       [("color", _APPAREL)]),
    # FURNITURE
    _t("coffee_table", "furniture", "coffee table", "Coffee Table",
       f"{HOME} › Furniture › Living Room Furniture › Tables › Coffee Tables", (45, 300),
       ["storage shelf", "mid century", "lift top", "metal frame", "round top"],
       [("color", _WOOD)]),
    _t("leather_sofa", "furniture", "leather sofa", "Leather Sofa",
       f"{HOME} › Furniture › Living Room Furniture › Sofas & Couches", (250, 900),
       ["genuine leather", "mid century", "reclining", "tufted back", "removable cushions"],
       [("color", ("black", "brown", "tan", "grey", "cognac")),
        ("size", ("loveseat", "three seat", "sectional"))]),
    _t("office_desk", "furniture", "office desk", "Office Desk",
       f"{HOME} › Furniture › Home Office Furniture › Desks", (60, 350),
       ["home office", "storage drawers", "metal frame", "keyboard tray", "l shaped"],
       [("color", _WOOD), ("size", ("40 inch", "55 inch"))]),
    _t("bookshelf", "furniture", "bookshelf", "Bookshelf",
       f"{HOME} › Furniture › Home Office Furniture › Bookcases", (40, 250),
       ["5 tier", "open shelves", "anti tip", "industrial style", "ladder shape"],
       [("color", _WOOD)]),
    _t("bed_frame", "furniture", "metal bed frame", "Bed Frame",
       f"{HOME} › Furniture › Bedroom Furniture › Beds, Frames & Bases › Bed Frames",
       (90, 500), ["no box spring needed", "under bed storage", "upholstered headboard",
                   "noise free", "metal slats"],
       [("size", ("twin", "full", "queen", "king")), ("color", ("black", "white", "grey"))]),
    _t("shoe_rack", "furniture", "shoe rack", "Shoe Rack",
       f"{HOME} › Storage & Organization › Clothing & Closet Storage › Shoe Organizers",
       (15, 80), ["4 tier", "stackable", "bamboo", "entryway", "metal frame"],
       [("color", _WOOD)]),
    _t("wool_rug", "furniture", "wool area rug", "Wool Area Rug",
       f"{HOME} › Home Décor Products › Area Rugs, Runners & Pads › Area Rugs", (40, 400),
       ["hand woven", "non slip", "stain resistant", "low pile", "bohemian"],
       [("size", ("5x7", "8x10", "3x5")), ("color", ("beige", "grey", "navy", "cream", "red"))]),
    _t("bar_stool", "furniture", "bar stools", "Bar Stools",
       f"{HOME} › Furniture › Game & Recreation Room Furniture › Home Bar Furniture › "
       "Barstools", (50, 300),
       ["swivel seat", "adjustable height", "set of 2", "footrest", "pu leather"],
       [("color", ("black", "white", "grey", "brown"))]),
    _t("tv_stand", "furniture", "tv stand", "TV Stand",
       f"{HOME} › Furniture › Living Room Furniture › Television Stands & Entertainment "
       "Centers", (60, 350),
       ["cable management", "storage cabinet", "led lights", "glass shelves"],
       [("color", _WOOD), ("size", ("55 inch", "70 inch"))]),
    _t("nightstand", "furniture", "nightstand", "Nightstand",
       f"{HOME} › Furniture › Bedroom Furniture › Nightstands", (30, 200),
       ["two drawers", "charging station", "bedroom", "open cubby", "rattan"],
       [("color", _WOOD)]),
    # ELECTRONICS
    _t("wireless_earbuds", "electronics", "wireless earbuds", "Wireless Earbuds",
       "Electronics › Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud "
       "Headphones", (15, 150),
       ["noise cancelling", "charging case", "water resistant", "long battery life",
        "touch control"],
       [("color", _GADGET)]),
    _t("phone_case", "electronics", "phone case", "Phone Case",
       "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases", (6, 40),
       ["shockproof", "wireless charging compatible", "clear back", "kickstand",
        "screen protector"],
       [("color", _GADGET), ("style", ("iphone 15", "iphone 14", "galaxy s24"))]),
    _t("desk_lamp", "electronics", "led desk lamp", "LED Desk Lamp",
       f"{HOME} › Lighting & Ceiling Fans › Lamps & Shades › Desk Lamps", (15, 80),
       ["dimmable", "usb charging port", "eye caring", "touch control", "adjustable arm"],
       [("color", ("black", "white", "silver", "grey"))]),
    _t("coffee_maker", "electronics", "coffee maker", "Coffee Maker",
       f"{HOME} › Kitchen & Dining › Coffee, Tea & Espresso › Coffee Makers", (25, 200),
       ["programmable", "12 cup", "auto shut off", "thermal carafe", "single serve"],
       [("color", ("black", "silver", "white", "red"))]),
    _t("power_bank", "electronics", "portable power bank", "Portable Power Bank",
       "Cell Phones & Accessories › Chargers & Power Adapters › Portable Power Banks",
       (15, 90), ["fast charging", "usb c", "high capacity", "led display", "solar panel"],
       [("color", _GADGET)]),
    _t("hdmi_cable", "electronics", "hdmi cable", "HDMI Cable",
       "Electronics › Television & Video › Accessories › Cables › HDMI Cables", (5, 35),
       ["4k", "high speed", "gold plated", "braided", "ethernet"],
       [("size", ("3 feet", "6 feet", "10 feet"))]),
    _t("smart_watch", "electronics", "smart watch", "Smart Watch",
       "Electronics › Wearable Technology › Smartwatches", (30, 250),
       ["heart rate monitor", "sleep tracking", "waterproof", "gps", "long battery life"],
       [("color", _GADGET), ("size", ("40mm", "44mm"))]),
    _t("bluetooth_speaker", "electronics", "bluetooth speaker", "Bluetooth Speaker",
       "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable "
       "Bluetooth Speakers", (20, 180),
       ["waterproof", "deep bass", "long battery life", "stereo sound", "built in microphone"],
       [("color", _GADGET)]),
    _t("flash_drive", "electronics", "usb flash drive", "USB Flash Drive",
       "Electronics › Computers & Accessories › Data Storage › USB Flash Drives", (6, 45),
       ["usb 3", "high speed", "metal casing", "keychain design", "password protection"],
       [("size", ("32gb", "64gb", "128gb", "256gb"))]),
    _t("webcam", "electronics", "webcam", "Webcam",
       "Electronics › Computers & Accessories › Computer Accessories & Peripherals › "
       "Webcams", (20, 120),
       ["1080p", "built in microphone", "auto focus", "privacy cover", "wide angle"],
       [("color", ("black", "white"))]),
)

#: attributes every product of a category may carry besides its type's own.
CATEGORY_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "beauty": ("cruelty free", "paraben free", "natural ingredients", "travel size",
               "dermatologist tested"),
    "food": ("gluten free", "non gmo", "usda organic", "kosher", "dairy free"),
    "fashion": ("machine wash", "hand wash", "polyester spandex", "daily wear"),
    "furniture": ("easy assembly", "living room", "space saving", "solid wood"),
    "electronics": ("plug and play", "easy install", "high definition", "compact design"),
}

#: short claims a bullet point may add after an attribute (none names an attribute).
BENEFITS: dict[str, tuple[str, ...]] = {
    "beauty": ("made for everyday routines", "gentle enough for daily use",
               "loved by professional stylists", "a small touch that goes a long way"),
    "food": ("a pantry favourite for busy weeks", "great for sharing with family",
             "carefully packed to stay fresh", "perfect for snacking on the go"),
    "fashion": ("comfortable from morning to night", "a versatile piece for any wardrobe",
                "tailored to move with you", "pairs well with jeans or chinos"),
    "furniture": ("built to last for years", "fits neatly into small apartments",
                  "sturdy enough for daily use", "a clean look for any room"),
    "electronics": ("works with most devices", "backed by a one year warranty",
                    "tested for reliable performance", "designed for work and travel"),
}

#: filler sentences for descriptions (none names an attribute of any type).
DESCRIPTIONS: dict[str, tuple[str, ...]] = {
    "beauty": ("Our team formulates every product in small batches.",
               "Apply as needed and enjoy the results.",
               "Store in a cool place away from direct sunlight."),
    "food": ("Every batch is checked by our quality team.",
             "Store in a cool pantry after opening.",
             "Enjoy it at breakfast, lunch or dinner."),
    "fashion": ("Check the size chart before ordering.",
                "Designed in our studio and made with care.",
                "A wardrobe staple you will reach for again and again."),
    "furniture": ("All hardware and instructions are included in the box.",
                  "Wipe clean with a damp cloth.",
                  "Our designers balance form and function."),
    "electronics": ("Please read the manual before first use.",
                    "Customer support is available every day of the week.",
                    "Compatible with the latest operating systems."),
}

#: review sentences by rating band (none names an attribute).
REVIEWS: tuple[tuple[str, ...], ...] = (
    ("Not what I expected.", "It broke after a week.", "Would not buy again."),
    ("It does the job.", "Okay for the price.", "Average quality overall."),
    ("Really happy with this purchase.", "Exactly as described.", "Great value, arrived fast."),
)

#: syllables brand names are built from.
BRAND_SYLLABLES: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("vel", "lum", "kor", "zan", "mir", "tav", "bel", "dor", "sol", "qui", "ner", "fen",
     "hal", "jor", "pax", "ril", "yon", "cas", "mol", "tem"),
    ("ora", "ix", "ena", "ara", "uno", "ello", "ari", "eon", "ista", "ova", "umi", "ax",
     "ette", "ino", "ana", "ory"),
)
