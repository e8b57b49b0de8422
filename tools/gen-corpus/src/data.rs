//! Static data: the PHEME events, vocabularies, news accounts, clients and places.

use crate::rng::Rng;

/// One PHEME event and how its threads are drawn.
pub(crate) struct Event {
    pub(crate) name: &'static str,
    pub(crate) threads: u64,
    pub(crate) rumours: u64,
    /// Epoch seconds of the first source tweet, and the span the sources cover.
    pub(crate) start: i64,
    pub(crate) window: i64,
    pub(crate) tags: &'static str,
    pub(crate) keywords: &'static str,
    /// Share of German and French tweets (the rest is mostly English).
    pub(crate) de: f64,
    pub(crate) fr: f64,
    pub(crate) news: &'static [(&'static str, &'static str, f64)],
}

pub(crate) const DAY: i64 = 86_400;

pub(crate) const EVENTS: [Event; 9] = [
    Event {
        name: "charliehebdo",
        threads: 2079,
        rumours: 458,
        start: 1_420_628_400,
        window: 3 * DAY,
        tags: "CharlieHebdo JeSuisCharlie Paris ParisShooting JeSuisAhmed",
        keywords: "Charlie Hebdo|Paris|gunmen|the magazine|cartoonists|satirical|Kouachi brothers|Dammartin|hostages|kosher supermarket|terror attack|France|journalists|freedom of speech",
        de: 0.01,
        fr: 0.03,
        news: &[
            ("France24_en", "FRANCE 24 English", 600_000.0),
            ("lemondefr", "Le Monde", 4_000_000.0),
            ("LeFigaro", "Le Figaro", 1_500_000.0),
            ("SkyNewsBreak", "Sky News Newsdesk", 1_200_000.0),
        ],
    },
    Event {
        name: "ebola-essien",
        threads: 14,
        rumours: 14,
        start: 1_413_124_200,
        window: 3 * DAY,
        tags: "Ebola Essien ACMilan",
        keywords: "Michael Essien|Ebola|AC Milan|Ghana|the footballer|the virus|tested positive|denies|hoax",
        de: 0.0,
        fr: 0.0,
        news: &[
            ("BBCAfrica", "BBC Africa", 600_000.0),
            ("SkySportsNews", "Sky Sports News", 2_000_000.0),
        ],
    },
    Event {
        name: "ferguson",
        threads: 1143,
        rumours: 284,
        start: 1_407_621_600,
        window: 13 * DAY / 2,
        tags: "Ferguson MikeBrown MichaelBrown HandsUpDontShoot",
        keywords: "Ferguson|Mike Brown|St. Louis|protesters|tear gas|the officer|Darren Wilson|curfew|unarmed teen|National Guard|rubber bullets",
        de: 0.0,
        fr: 0.0,
        news: &[
            ("AntonioFrench", "Antonio French", 80_000.0),
            ("stltoday", "St. Louis Post-Dispatch", 150_000.0),
            ("WesleyLowery", "Wesley Lowery", 90_000.0),
            ("KSDKNews", "KSDK NewsChannel 5", 100_000.0),
        ],
    },
    Event {
        name: "germanwings-crash",
        threads: 469,
        rumours: 238,
        start: 1_427_193_600,
        window: 10 * DAY / 3,
        tags: "Germanwings 4U9525 A320 planecrash",
        keywords: "Germanwings|Airbus A320|French Alps|the crash|co-pilot|Lufthansa|Barcelona|Düsseldorf|flight 4U9525|passengers|black box|cockpit",
        de: 0.03,
        fr: 0.01,
        news: &[
            ("airlivenet", "AirLive.net", 200_000.0),
            ("flightradar24", "Flightradar24", 300_000.0),
        ],
    },
    Event {
        name: "gurlitt",
        threads: 138,
        rumours: 61,
        start: 1_416_445_200,
        window: 9 * DAY / 2,
        tags: "Gurlitt Kunstmuseum Bern Raubkunst",
        keywords: "Gurlitt|Kunstmuseum Bern|Sammlung|Raubkunst|Cornelius Gurlitt|München|Erben|Bilder",
        de: 0.6,
        fr: 0.02,
        news: &[
            ("tagesschau", "tagesschau", 700_000.0),
            ("SPIEGELONLINE", "SPIEGEL ONLINE", 1_300_000.0),
            ("BILD", "BILD", 900_000.0),
            ("SZ", "Süddeutsche Zeitung", 600_000.0),
            ("welt", "DIE WELT", 500_000.0),
        ],
    },
    Event {
        name: "ottawashooting",
        threads: 890,
        rumours: 470,
        start: 1_413_986_400,
        window: DAY / 2,
        tags: "OttawaShooting Ottawa cdnpoli ParliamentHill",
        keywords: "Ottawa|Parliament Hill|the War Memorial|the soldier|gunman|Nathan Cirillo|lockdown|Centre Block|RCMP|Kevin Vickers|shots fired",
        de: 0.0,
        fr: 0.02,
        news: &[
            ("CBCNews", "CBC News", 1_000_000.0),
            ("CTVNews", "CTV News", 500_000.0),
            ("globeandmail", "The Globe and Mail", 600_000.0),
            ("OttawaCitizen", "Ottawa Citizen", 100_000.0),
        ],
    },
    Event {
        name: "prince-toronto",
        threads: 233,
        rumours: 229,
        start: 1_415_087_100,
        window: 7 * DAY / 10,
        tags: "PrinceToronto Prince Toronto",
        keywords: "Prince|Toronto|the concert|Massey Hall|secret show|tickets|the Danforth|tonight",
        de: 0.0,
        fr: 0.0,
        news: &[
            ("TorontoStar", "Toronto Star", 400_000.0),
            ("CP24", "CP24", 500_000.0),
        ],
    },
    Event {
        name: "putinmissing",
        threads: 238,
        rumours: 126,
        start: 1_426_204_800,
        window: 16 * DAY / 5,
        tags: "Putin PutinMissing Kremlin Russia",
        keywords: "Putin|the Kremlin|missing|his health|Moscow|girlfriend|Kabaeva|Switzerland|a baby|coup|seen in public",
        de: 0.01,
        fr: 0.0,
        news: &[
            ("meduza_en", "Meduza in English", 50_000.0),
            ("KremlinRussia_E", "President of Russia", 400_000.0),
        ],
    },
    Event {
        name: "sydneysiege",
        threads: 1221,
        rumours: 522,
        start: 1_418_599_200,
        window: 3 * DAY / 4,
        tags: "sydneysiege MartinPlace illridewithyou Sydney",
        keywords: "Sydney|Martin Place|Lindt cafe|hostages|gunman|the siege|the flag|Man Haron Monis|the CBD|NSW police",
        de: 0.0,
        fr: 0.0,
        news: &[
            ("abcnews", "ABC News", 900_000.0),
            ("smh", "The Sydney Morning Herald", 400_000.0),
            ("9NewsAUS", "Nine News Australia", 300_000.0),
            ("7NewsSydney", "7 News Sydney", 200_000.0),
        ],
    },
];

pub(crate) const GLOBAL_NEWS: &[(&str, &str, f64)] = &[
    ("BBCBreaking", "BBC Breaking News", 6_500_000.0),
    ("cnnbrk", "CNN Breaking News", 20_000_000.0),
    ("SkyNews", "Sky News", 2_300_000.0),
    ("Reuters", "Reuters Top News", 7_000_000.0),
    ("AP", "The Associated Press", 6_000_000.0),
    ("BBCWorld", "BBC News (World)", 12_000_000.0),
    ("CNN", "CNN", 18_000_000.0),
    ("guardian", "The Guardian", 4_000_000.0),
    ("Independent", "The Independent", 1_500_000.0),
    ("ABC", "ABC News", 5_000_000.0),
    ("RT_com", "RT", 1_400_000.0),
    ("AJEnglish", "Al Jazeera English", 2_500_000.0),
    ("nytimes", "The New York Times", 13_000_000.0),
    ("WSJ", "Wall Street Journal", 6_000_000.0),
    ("TIME", "TIME.com", 7_000_000.0),
    ("NBCNews", "NBC News", 3_500_000.0),
    ("Telegraph", "The Telegraph", 1_500_000.0),
    ("MailOnline", "Daily Mail Online", 1_200_000.0),
    ("ChrisCuomo", "Chris Cuomo", 1_000_000.0),
    ("BreakingNews", "Breaking News", 8_000_000.0),
];

const EN: &str = "the the the a a to to of of and and in in is is it it this that for on you you be are was with not so they what just have all we people news more now like about if no how why who will can do my me your he she his her them their our from at by an as or but up out one still were been would should could really very too here there today breaking report reports reported confirmed unconfirmed source sources say says said police officials media story video photo pics live update shot dead killed injured attack suspect victims families thoughts prayers sad horrible terrible awful shocking disgusting crazy insane unbelievable true false fake real rumour rumor hoax wrong right actually literally seriously know think believe hope pray praying stay safe everyone world country city government president minister time day night hours minutes ago first last new old good bad best worst need want see look watch read wait hear heard tell told don't can't it's that's I'm isn't won't didn't what's let's there's they're you're lol wtf omg smh RIP yes nope well thanks sorry love hate god please stop let them go again never always every anyone nobody something nothing";

const DE: &str = "der die das und ist nicht ein eine zu mit den von für auf im sich dem des auch es wird sind noch nach bei wie aber jetzt schon nur Bilder Sammlung Kunst Museum Erbe Nachlass Bern München Gemälde Raubkunst Juden Erben Stiftung Entscheidung heute Nachricht über Schweiz Künstler größte Bürger Gerüchte Behörden Prüfung Rückgabe übernehmen müssen können würde schön schrecklich traurig Glück Grüße dürfen Öffentlichkeit Schätze Verhandlungen gehört Täter Opfer Flugzeug Absturz Passagiere Unglück Welt Menschen Polizei";

const FR: &str = "le la les un une des et est à de du en pour pas que qui dans sur avec ce il elle nous vous ils sont été fait tout très liberté égalité fraternité presse journalistes dessinateurs attentat tués blessés rédaction république solidarité hommage rassemblement soir marche courage pensées victimes frères police terroristes otages épicerie où déjà ça être après contre même";

const ES: &str = "el la los las un una y es en de que por para con no se del al lo más muy esto está son fue todo ahora noticias hoy ataque policía muertos heridos triste horrible qué cómo también años país mundo vida paz";

const JA: &str = "速報 フランス パリ 銃撃 事件 ニュース 怖い 本当に 悲しい テロ 警察 犠牲者 ご冥福をお祈りします 人質 シドニー 飛行機 墜落 ドイツ 大丈夫 マジか 情報 拡散希望 これは ひどい";

const ASTRAL_EMOJI: &str = "😢 🙏 😡 👍 💔 😱 😂 😭 👏 🔥 😳 🇫🇷 🙌 😔 💯 👀";
const BMP_EMOJI: &str = "❤️ ♥ ☺ ✌ ✈️ ☹ ★ ✔ ☝ ⚠";

const FIRST: &str = "James John Robert Michael David William Richard Joseph Thomas Chris Daniel Matt Mark Paul Steven Andrew Josh Kevin Brian Ryan Jason Gary Tom Ben Sam Jack Harry Liam Mary Patricia Jennifer Linda Liz Barbara Susan Jessica Sarah Karen Nancy Lisa Emma Emily Hannah Sophie Laura Rachel Amy Kate Danni Samantha Nicole Megan Chloe Olivia Zoe Ali Omar Ahmed Fatima Priya Raj Wei Yuki Marco Luca Pierre Marie Hans Anna";
const LAST: &str = "Smith Jones Taylor Brown Williams Wilson Johnson Davies Robinson Wright Thompson Evans Walker White Roberts Green Hall Wood Jackson Clarke Miller Davis Garcia Martinez Anderson Thomas Moore Martin Lee Harris Clark Lewis Young King Scott Adams Baker Nelson Hill Campbell Mitchell Carter Turner Phillips Parker Collins Edwards Stewart Morris Murphy Cook Rogers Morgan Cooper Peterson Reed Bailey Bell Kelly Howard Ward Cox Richardson Byng Traynor ONeil Nguyen Khan Patel Singh";
const NICK: &str = "The Dark Knight|Mr. December|Ban Collectivism|INTERNACIONALISTA|Just Me|Anonymous|Citizen Journalist|NewsHound|Truth Seeker|The Real Deal|Captain Obvious|Night Owl|Free Spirit|Local Hero|Coffee Queen|Football Mad|Sunshine|Wanderer|Grumpy Old Man|Bookworm";
const DE_NAMES: &str = "Jürgen Müller|Jörg Schäfer|Björn Weiß|Günther Köhler|Sören Krüger|Ute Großmann|Hans Becker|Anna Schmidt|Katrin Hoffmann|Lukas Wagner|Stefan Fischer|Monika Bauer";
const FR_NAMES: &str = "Hélène Dupont|François Lefèvre|Jérôme Martin|Céline Bernard|Amélie Petit|Stéphane Moreau|Léa Girard|Mathieu Roux|Julien Fournier|Sophie Mercier";
const ES_NAMES: &str = "José García|María López|Sofía Martínez|Andrés Pérez|Lucía Gómez|Carlos Sánchez|Ana Díaz|Raúl Fernández";
const JA_NAMES: &str = "さくら|たけし|ゆうき|はるか|けんじ|みさき|田中太郎|佐藤花子|鈴木一郎";

const BIO_EN: &str = "Mum of two|Proud dad|Views are my own|RTs are not endorsements|Journalist|Student|Football fan|Love music, films and travelling|#Christian|Living the dream|Coffee addict|Dog lover|Writer|Photographer|Marketing professional|Politics junkie|News junkie|Nurse|Teacher|Engineer|Gamer|Liverpool FC|Arsenal till I die|Chelsea FC|Blogger|Opinions my own|Husband, father, friend|Keep calm and carry on|God first|Life is short|Peace & love|Social media manager|PhD candidate|Retired and loving it|Veteran|Patriot|Conservative|Progressive|Feminist|Artist|Entrepreneur|Runner|Foodie|Traveller|Digital strategist|Reporter|Editor|Producer|Correspondent|Tech enthusiast|Instagram: @me|Snapchat: me|Don't follow me, I'm lost too|I tweet about news, sports and whatever else|Human rights activist|Mother, wife, daughter|Music is life|Never give up";
const BIO_DE: &str = "Journalist|Kunsthistorikerin|Meinungen sind meine eigenen|Fußballfan|Vater von zwei Kindern|Nachrichten aus Bern und der Welt|Student in München|Politik, Kultur und Gesellschaft|Grüße aus Köln|Retweets sind keine Zustimmung";
const BIO_FR: &str = "Journaliste|Étudiante à Paris|Passionné de politique|Les opinions exprimées ici sont les miennes|Rédacteur en chef|Amoureux de la liberté|Père de famille|Photographe indépendante";
const BIO_NEWS: &str = "Breaking news and analysis|Official account|News, views and features|Latest breaking news from around the world|Follow for live updates|The best of our journalism|Award-winning news coverage|Your source for breaking news, weather and sports";

const LOCATIONS: &str = "London|Paris|Paris, France|New York, NY|Toronto, Ontario|Ottawa|Sydney, Australia|St. Louis, MO|Berlin|Deutschland|UK|United Kingdom|Canada|USA|Los Angeles, CA|Chicago, IL|Manchester|Glasgow, Scotland|Dublin, Ireland|Melbourne|Atlanta, GA|Texas|California|Florida|Earth|Worldwide|Bern, Schweiz|München|Lyon|Madrid|Tokyo|Gornal - England|midwest |Arrington, TN|somewhere";

pub(crate) const TIME_ZONES: &[(&str, i32)] = &[
    ("London", 0),
    ("Eastern Time (US & Canada)", -18_000),
    ("Central Time (US & Canada)", -21_600),
    ("Pacific Time (US & Canada)", -28_800),
    ("Mountain Time (US & Canada)", -25_200),
    ("Atlantic Time (Canada)", -14_400),
    ("Amsterdam", 3_600),
    ("Paris", 3_600),
    ("Berlin", 3_600),
    ("Bern", 3_600),
    ("Madrid", 3_600),
    ("Athens", 7_200),
    ("Sydney", 39_600),
    ("Brisbane", 36_000),
    ("Tokyo", 32_400),
    ("Casablanca", 0),
    ("Dublin", 0),
    ("Edinburgh", 0),
    ("Quito", -18_000),
    ("Hawaii", -36_000),
    ("Arizona", -25_200),
];

pub(crate) const CLIENTS: &[(&str, u32)] = &[
    (
        "<a href=\"http://twitter.com/download/iphone\" rel=\"nofollow\">Twitter for iPhone</a>",
        363,
    ),
    (
        "<a href=\"http://twitter.com\" rel=\"nofollow\">Twitter Web Client</a>",
        234,
    ),
    (
        "<a href=\"http://twitter.com/download/android\" rel=\"nofollow\">Twitter for Android</a>",
        162,
    ),
    (
        "<a href=\"https://about.twitter.com/products/tweetdeck\" rel=\"nofollow\">TweetDeck</a>",
        70,
    ),
    (
        "<a href=\"http://twitter.com/#!/download/ipad\" rel=\"nofollow\">Twitter for iPad</a>",
        55,
    ),
    (
        "<a href=\"http://www.hootsuite.com\" rel=\"nofollow\">Hootsuite</a>",
        22,
    ),
    (
        "<a href=\"http://www.echofon.com/\" rel=\"nofollow\">Echofon</a>",
        16,
    ),
    (
        "<a href=\"http://www.twitter.com\" rel=\"nofollow\">Twitter for Windows Phone</a>",
        10,
    ),
    (
        "<a href=\"http://www.socialflow.com\" rel=\"nofollow\">SocialFlow</a>",
        10,
    ),
    (
        "<a href=\"http://www.twitter.com\" rel=\"nofollow\">Twitter for BlackBerry</a>",
        8,
    ),
    (
        "<a href=\"https://mobile.twitter.com\" rel=\"nofollow\">Mobile Web (M2)</a>",
        7,
    ),
    (
        "<a href=\"http://tapbots.com/tweetbot\" rel=\"nofollow\">Tweetbot for i\u{39f}S</a>",
        7,
    ),
    (
        "<a href=\"http://blackberry.com/twitter\" rel=\"nofollow\">Twitter for BlackBerry\u{ae}</a>",
        6,
    ),
    (
        "<a href=\"http://www.tweetcaster.com\" rel=\"nofollow\">TweetCaster for Android</a>",
        4,
    ),
    ("<a href=\"http://dlvr.it\" rel=\"nofollow\">dlvr.it</a>", 4),
];

const COLORS: &str = "333333 000000 3B3B3B 989898 C0DEED DDEEF6 0084B4 C70620 FFFFFF 352726 E61C52 FA743E 30519C 1A1B1F 252429 F5F8FA 9266CC 3B94D9 ABB8C2 89C9FA 94D487 E81C4F 4A913C DD2E44 642D8B";

const DOMAINS: &str = "www.bbc.co.uk/news|edition.cnn.com|www.theguardian.com/world|www.independent.co.uk/news|www.reuters.com/article|www.telegraph.co.uk/news|www.dailymail.co.uk/news|www.nytimes.com|news.sky.com/story|www.huffingtonpost.com|www.lemonde.fr/societe|www.spiegel.de/kultur|www.tagesschau.de|www.cbc.ca/news|www.smh.com.au/nsw|www.stltoday.com/news|www.airlive.net|www.youtube.com/watch|instagram.com/p|www.facebook.com";

pub(crate) struct Place {
    pub(crate) full_name: &'static str,
    pub(crate) name: &'static str,
    pub(crate) country: &'static str,
    pub(crate) code: &'static str,
    pub(crate) id: &'static str,
    /// west, south, east, north
    pub(crate) bbox: [f64; 4],
}

pub(crate) const PLACES: &[Place] = &[
    Place {
        full_name: "Dudley, England",
        name: "Dudley",
        country: "United Kingdom",
        code: "GB",
        id: "477b54bb4fc386a8",
        bbox: [-2.191695, 52.429765, -2.057189, 52.557702],
    },
    Place {
        full_name: "Nashville, TN",
        name: "Nashville",
        country: "United States",
        code: "US",
        id: "00ab941b685334e3",
        bbox: [-87.022482, 35.99451, -86.560616, 36.405448],
    },
    Place {
        full_name: "Paris, France",
        name: "Paris",
        country: "France",
        code: "FR",
        id: "09f6a7707f18e0b1",
        bbox: [2.224122, 48.815576, 2.46976, 48.902156],
    },
    Place {
        full_name: "London, England",
        name: "London",
        country: "United Kingdom",
        code: "GB",
        id: "457b4814b4240d87",
        bbox: [-0.510375, 51.28676, 0.334015, 51.691874],
    },
    Place {
        full_name: "Sydney, New South Wales",
        name: "Sydney",
        country: "Australia",
        code: "AU",
        id: "0073b76548e5984f",
        bbox: [150.520929, -33.990882, 151.343021, -33.578141],
    },
    Place {
        full_name: "Ottawa, Ontario",
        name: "Ottawa",
        country: "Canada",
        code: "CA",
        id: "3797791ff9c0e4c6",
        bbox: [-76.353876, 44.962234, -75.246655, 45.536937],
    },
    Place {
        full_name: "Toronto, Ontario",
        name: "Toronto",
        country: "Canada",
        code: "CA",
        id: "8e9665cec9370f0f",
        bbox: [-79.639319, 43.403221, -79.115243, 43.855401],
    },
    Place {
        full_name: "St Louis, MO",
        name: "St Louis",
        country: "United States",
        code: "US",
        id: "0570f015c264cbd9",
        bbox: [-90.320464, 38.533364, -90.166285, 38.774369],
    },
    Place {
        full_name: "Berlin, Deutschland",
        name: "Berlin",
        country: "Deutschland",
        code: "DE",
        id: "3078869807f9dd36",
        bbox: [13.088304, 52.338079, 13.760909, 52.675323],
    },
];

/// The static word lists, split once.
pub(crate) struct Vocab {
    pub(crate) en: Vec<&'static str>,
    pub(crate) de: Vec<&'static str>,
    pub(crate) fr: Vec<&'static str>,
    pub(crate) es: Vec<&'static str>,
    pub(crate) ja: Vec<&'static str>,
    pub(crate) astral: Vec<&'static str>,
    pub(crate) bmp_emoji: Vec<&'static str>,
    pub(crate) first: Vec<&'static str>,
    pub(crate) last: Vec<&'static str>,
    pub(crate) nick: Vec<&'static str>,
    pub(crate) de_names: Vec<&'static str>,
    pub(crate) fr_names: Vec<&'static str>,
    pub(crate) es_names: Vec<&'static str>,
    pub(crate) ja_names: Vec<&'static str>,
    pub(crate) bio_en: Vec<&'static str>,
    pub(crate) bio_de: Vec<&'static str>,
    pub(crate) bio_fr: Vec<&'static str>,
    pub(crate) bio_news: Vec<&'static str>,
    pub(crate) locations: Vec<&'static str>,
    pub(crate) colors: Vec<&'static str>,
    pub(crate) domains: Vec<&'static str>,
    pub(crate) tags: Vec<Vec<&'static str>>,
    pub(crate) keywords: Vec<Vec<&'static str>>,
    pub(crate) clients: Vec<u32>,
}

impl Vocab {
    pub(crate) fn new() -> Self {
        let ws = |s: &'static str| s.split_whitespace().collect::<Vec<_>>();
        let bar = |s: &'static str| s.split('|').collect::<Vec<_>>();
        let mut cum = 0;
        Vocab {
            en: ws(EN),
            de: ws(DE),
            fr: ws(FR),
            es: ws(ES),
            ja: ws(JA),
            astral: ws(ASTRAL_EMOJI),
            bmp_emoji: ws(BMP_EMOJI),
            first: ws(FIRST),
            last: ws(LAST),
            nick: bar(NICK),
            de_names: bar(DE_NAMES),
            fr_names: bar(FR_NAMES),
            es_names: bar(ES_NAMES),
            ja_names: bar(JA_NAMES),
            bio_en: bar(BIO_EN),
            bio_de: bar(BIO_DE),
            bio_fr: bar(BIO_FR),
            bio_news: bar(BIO_NEWS),
            locations: bar(LOCATIONS),
            colors: ws(COLORS),
            domains: bar(DOMAINS),
            tags: EVENTS.iter().map(|e| ws(e.tags)).collect(),
            keywords: EVENTS.iter().map(|e| bar(e.keywords)).collect(),
            clients: CLIENTS
                .iter()
                .map(|&(_, w)| {
                    cum += w;
                    cum
                })
                .collect(),
        }
    }

    pub(crate) fn client(&self, rng: &mut Rng) -> usize {
        let total = *self.clients.last().unwrap_or(&1);
        let x = rng.below(u64::from(total)) as u32;
        self.clients.iter().position(|&c| x < c).unwrap_or(0)
    }
}
