//! Deterministic generator of PHEME-shaped Twitter corpora, for benchmarks.
//!
//! ```text
//! cargo run --release --example gen_corpus -- OUT_DIR --threads N [--seed S] [--retweets FRACTION] [--force]
//! ```
//!
//! Writes `N` conversation threads in the layout of the PHEME veracity release
//! (figshare 6392078):
//!
//! ```text
//! OUT_DIR/<event>-all-rnr-threads/<rumours|non-rumours>/<source_id>/
//!     source-tweets/<source_id>.json     (source-tweet/ in about 1 thread in 5)
//!     reactions/<tweet_id>.json          replies (absent in about 1 thread in 10)
//!     retweets/<tweet_id>.json           only with --retweets F > 0
//! ```
//!
//! Every file is one compact Twitter API v1.1 status object shaped like the
//! real PHEME files: the same key set and key order, a full user object,
//! `\/`-escaped slashes and `\uXXXX` escapes (surrogate pairs for emoji) for
//! all non-ASCII text, about half the files ending with a newline. The mix
//! follows the measured PHEME rates: media (`extended_entities`) on about 9%
//! of tweets, links on about 12%, non-ASCII text (German, French, Spanish,
//! Japanese, emoji) on about 12%, `\n` on about 5%, HTML entities on about 4%,
//! user descriptions empty in about 15% and null in about 1 in 5,000, the 9
//! PHEME events with their thread and rumour counts (scaled to `N`), and
//! heavy-tailed reply counts (a discretized log-normal, mean about 15 replies
//! per thread, a few threads with hundreds). Ids are 18-digit snowflakes that
//! encode the creation time, so they increase with time inside a thread; all
//! tweet ids are unique. Reactions come minutes to days after their source.
//!
//! Every tweet is valid for the feature contract (`FEATURES.md`): building
//! the corpus reports no bad inputs. `--threads 6425` gives a PHEME-sized
//! corpus: 6,425 threads, about 99k replies and 280 MB. File sizes follow the
//! real files kind by kind (plain reply about 2.5 KB, with a photo about 4 KB,
//! 2-6.5 KB overall; mean about 2.6 KB).
//!
//! The output is byte-identical for the same arguments on any machine and
//! for any number of worker threads (`RAYON_NUM_THREADS`): each conversation
//! thread is drawn from its own xoshiro256** stream seeded from (seed, thread
//! index), and no platform math library is used. Retweets use a stream of
//! their own, so the replies are the same whatever `--retweets` is. `--threads`
//! counts conversation threads, not workers. At the end one JSON line is
//! printed: `{"threads": .., "replies": .., "retweets": .., "files": .., "bytes": ..}`;
//! nothing else is shown unless there is an error (a message naming the path,
//! exit status 1). A non-empty OUT_DIR is refused unless `--force`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::{fs, io};

use chrono::DateTime;
use clap::Parser;
use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Thread indices are stored in the low 22 bits of every tweet id.
const MAX_THREADS: i64 = 1 << 22;
/// The PHEME veracity release has this many threads; `--threads 6425` reproduces its event mix exactly.
const PHEME_THREADS: u64 = 6425;

/// Generate a deterministic PHEME-shaped Twitter corpus for benchmarks.
///
/// Writes N conversation threads (a source tweet and its replies) under
/// OUT_DIR/<event>-all-rnr-threads/<rumours|non-rumours>/<source_id>/, with the
/// source tweet in source-tweets/ (or source-tweet/), replies in reactions/ and,
/// with --retweets, retweets in retweets/. Each file is a compact Twitter v1.1
/// status object with a full user object, like the real PHEME files. The 9
/// PHEME events and their rumour/non-rumour mix are scaled to N; replies per
/// thread are heavy-tailed with a mean of about 15. --threads 6425 gives a
/// PHEME-sized corpus (about 99k replies, 280 MB).
///
/// The output is byte-identical for the same arguments on any machine and any
/// number of worker threads (set RAYON_NUM_THREADS to choose the workers). On
/// success one JSON line is printed: {"threads", "replies", "retweets",
/// "files", "bytes"}. On error a message naming the path goes to stderr and the
/// exit status is 1 (2 for bad usage).
#[derive(Parser, Debug)]
#[command(name = "gen_corpus")]
struct Args {
    /// Directory to write the corpus into; created if absent, must be empty unless --force
    out_dir: PathBuf,
    /// Conversation threads (source tweets) to generate, 1 to 4194304; 6425 is PHEME-sized (not worker threads: see RAYON_NUM_THREADS)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS))]
    threads: u32,
    /// Seed of the generator; the same seed and N give the same bytes
    #[arg(long, value_name = "S", default_value_t = 2015)]
    seed: u64,
    /// Also write about FRACTION x (replies of the thread) retweets into each thread's retweets/ folder
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = parse_fraction)]
    retweets: f64,
    /// Write into a non-empty OUT_DIR (files with the same names are overwritten, others are left alone)
    #[arg(long)]
    force: bool,
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if f.is_finite() && (0.0..=1000.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("`{s}` is not between 0 and 1000"))
    }
}

// ---------------------------------------------------------------------------
// Randomness: splitmix64 seeding, xoshiro256** stream, and only IEEE basic
// arithmetic on floats (no libm), so that every platform draws the same values.

struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut s = [0u64; 4];
        for v in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *v = z ^ (z >> 31);
        }
        Rng(s)
    }

    /// A stream for (seed, tag, index), independent of every other stream.
    fn derive(seed: u64, tag: &str, index: u64) -> Self {
        let mut key = Vec::with_capacity(tag.len() + 8);
        key.extend_from_slice(tag.as_bytes());
        key.extend_from_slice(&index.to_le_bytes());
        Rng::new(xxh3_64_with_seed(&key, seed))
    }

    fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    fn word<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }

    /// Approximately standard normal (Irwin-Hall sum of 12 uniforms).
    fn normal(&mut self) -> f64 {
        let mut sum = 0.0;
        for _ in 0..12 {
            sum += self.unit();
        }
        sum - 6.0
    }

    fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * exp(sigma * self.normal())
    }

    /// A non-negative count drawn from a log-normal.
    fn count(&mut self, median: f64, sigma: f64) -> u64 {
        self.lognormal(median, sigma).round() as u64
    }

    fn alnum(&mut self, out: &mut String, n: usize) {
        const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for _ in 0..n {
            out.push(char::from(*self.pick(CHARS)));
        }
    }
}

/// `e^x` with basic arithmetic only (range reduction and a Taylor series).
fn exp(x: f64) -> f64 {
    let x = x.clamp(-700.0, 700.0);
    let k = (x / std::f64::consts::LN_2).round();
    let r = x - k * std::f64::consts::LN_2;
    let (mut term, mut sum) = (1.0, 1.0);
    for i in 1..=20 {
        term *= r / f64::from(i);
        sum += term;
    }
    sum * f64::from_bits(((k as i64 + 1023) as u64) << 52)
}

// ---------------------------------------------------------------------------
// Static data: events, vocabularies, accounts, places.

struct Event {
    name: &'static str,
    threads: u64,
    rumours: u64,
    /// Epoch seconds of the first source tweet, and the span the sources cover.
    start: i64,
    window: i64,
    tags: &'static str,
    keywords: &'static str,
    /// Share of German and French tweets (the rest is mostly English).
    de: f64,
    fr: f64,
    news: &'static [(&'static str, &'static str, f64)],
}

const DAY: i64 = 86_400;

const EVENTS: [Event; 9] = [
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

const GLOBAL_NEWS: &[(&str, &str, f64)] = &[
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

const TIME_ZONES: &[(&str, i32)] = &[
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

const CLIENTS: &[(&str, u32)] = &[
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

struct Place {
    full_name: &'static str,
    name: &'static str,
    country: &'static str,
    code: &'static str,
    id: &'static str,
    /// west, south, east, north
    bbox: [f64; 4],
}

const PLACES: &[Place] = &[
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
struct Vocab {
    en: Vec<&'static str>,
    de: Vec<&'static str>,
    fr: Vec<&'static str>,
    es: Vec<&'static str>,
    ja: Vec<&'static str>,
    astral: Vec<&'static str>,
    bmp_emoji: Vec<&'static str>,
    first: Vec<&'static str>,
    last: Vec<&'static str>,
    nick: Vec<&'static str>,
    de_names: Vec<&'static str>,
    fr_names: Vec<&'static str>,
    es_names: Vec<&'static str>,
    ja_names: Vec<&'static str>,
    bio_en: Vec<&'static str>,
    bio_de: Vec<&'static str>,
    bio_fr: Vec<&'static str>,
    bio_news: Vec<&'static str>,
    locations: Vec<&'static str>,
    colors: Vec<&'static str>,
    domains: Vec<&'static str>,
    tags: Vec<Vec<&'static str>>,
    keywords: Vec<Vec<&'static str>>,
    clients: Vec<u32>,
}

impl Vocab {
    fn new() -> Self {
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

    fn client(&self, rng: &mut Rng) -> usize {
        let total = *self.clients.last().unwrap_or(&1);
        let x = rng.below(u64::from(total)) as u32;
        self.clients.iter().position(|&c| x < c).unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------
// Time and ids.

/// Twitter's snowflake epoch (ms).
const TWEPOCH_MS: i64 = 1_288_834_974_657;

fn snowflake(ms: i64, low: u64) -> u64 {
    (((ms - TWEPOCH_MS) as u64) << 22) | (low & 0x3F_FFFF)
}

/// `Www Mmm dd HH:MM:SS +0000 yyyy`.
fn twitter_time(out: &mut String, secs: i64) {
    let t = DateTime::from_timestamp(secs, 0).expect("timestamps stay in 2006-2016");
    let _ = write!(out, "{}", t.format("%a %b %d %H:%M:%S +0000 %Y"));
}

/// Roughly the user id Twitter handed out at a given time (piecewise linear).
fn user_id_at(secs: i64) -> u64 {
    const KNOTS: [(i64, i64); 11] = [
        (1_142_899_200, 12),
        (1_167_609_600, 600_000),
        (1_199_145_600, 11_000_000),
        (1_230_768_000, 18_000_000),
        (1_262_304_000, 100_000_000),
        (1_293_840_000, 235_000_000),
        (1_325_376_000, 455_000_000),
        (1_356_998_400, 1_100_000_000),
        (1_388_534_400, 2_270_000_000),
        (1_420_070_400, 2_960_000_000),
        (1_433_116_800, 3_300_000_000),
    ];
    let i = KNOTS
        .iter()
        .rposition(|k| k.0 <= secs)
        .unwrap_or(0)
        .min(KNOTS.len() - 2);
    let (t0, v0) = KNOTS[i];
    let (t1, v1) = KNOTS[i + 1];
    let v =
        i128::from(v0) + i128::from(v1 - v0) * i128::from(secs.max(t0) - t0) / i128::from(t1 - t0);
    v.max(12) as u64
}

// ---------------------------------------------------------------------------
// The model.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    En,
    De,
    Fr,
    Es,
    Ja,
}

impl Lang {
    fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Es => "es",
            Lang::Ja => "ja",
        }
    }
}

#[derive(Clone)]
struct UrlEnt {
    url: String,
    expanded: String,
    display: String,
    start: usize,
    end: usize,
}

#[derive(Clone)]
struct Mention {
    id: u64,
    screen_name: String,
    name: String,
    start: usize,
    end: usize,
}

#[derive(Clone)]
struct Media {
    id: u64,
    key: String,
    url: String,
    owner: String,
    status_id: u64,
    w: u32,
    h: u32,
    start: usize,
    end: usize,
    /// (status id, user id) of the tweet the photo was first posted in.
    from: Option<(u64, u64)>,
    /// Further photos of a multi-photo tweet (id, key, width, height); they
    /// appear in `extended_entities` only.
    more: Vec<(u64, String, u32, u32)>,
}

/// Key order of the user object; PHEME files come in three shapes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum UserShape {
    /// With `profile_location` (2015 crawls).
    WithLocation,
    /// Without `profile_location`.
    Plain,
    /// Older crawls: no `entities` and no `is_translation_enabled`.
    Old,
}

#[derive(Clone)]
struct User {
    id: u64,
    screen_name: String,
    name: String,
    description: Option<String>,
    desc_urls: Vec<UrlEnt>,
    url: Option<UrlEnt>,
    location: &'static str,
    time_zone: Option<(&'static str, i32)>,
    created: i64,
    followers: u64,
    friends: u64,
    statuses: u64,
    favourites: u64,
    listed: u64,
    verified: bool,
    geo_enabled: bool,
    use_bg_image: bool,
    bg_tile: bool,
    default_profile: bool,
    default_image: bool,
    translator: bool,
    colors: [&'static str; 5],
    bg_image: String,
    image: String,
    banner: Option<i64>,
    lang: &'static str,
    shape: UserShape,
}

#[derive(Clone)]
struct Tweet {
    id: u64,
    secs: i64,
    text: String,
    client: usize,
    /// (status id, user id, screen name)
    reply_to: Option<(u64, u64, String)>,
    mentions: Vec<Mention>,
    hashtags: Vec<(String, usize, usize)>,
    urls: Vec<UrlEnt>,
    media: Option<Media>,
    retweet_count: u64,
    favorite_count: u64,
    lang: &'static str,
    /// `possibly_sensitive`, and whether `possibly_sensitive_appealable` follows it.
    sensitive: Option<(bool, bool)>,
    geo: Option<(f64, f64)>,
    place: Option<usize>,
    user: User,
    retweeted: Option<Box<Tweet>>,
}

/// Text under construction, with its length in code points (entity indices).
#[derive(Default)]
struct TextBuf {
    s: String,
    n: usize,
}

impl TextBuf {
    fn push(&mut self, t: &str) {
        self.s.push_str(t);
        self.n += t.chars().count();
    }

    fn space(&mut self) {
        if !self.s.is_empty() && !self.s.ends_with([' ', '\n']) {
            self.push(" ");
        }
    }
}

/// Everything a thread generator needs.
struct Ctx {
    out: PathBuf,
    n: u64,
    seed: u64,
    retweets: f64,
    v: Vocab,
}

fn tco(rng: &mut Rng, secs: i64) -> String {
    // t.co links were http:// (22 chars) until early 2015, then mostly https:// (23).
    let mut s = String::from(if secs > 1_420_070_400 && rng.chance(0.5) {
        "https://t.co/"
    } else {
        "http://t.co/"
    });
    rng.alnum(&mut s, 10);
    s
}

fn link(rng: &mut Rng, v: &Vocab, tb: &mut TextBuf, secs: i64, words: &[&str]) -> UrlEnt {
    tb.space();
    let url = tco(rng, secs);
    let start = tb.n;
    tb.push(&url);
    let mut path = String::from(rng.word(&v.domains));
    path.push('/');
    for i in 0..rng.between(2, 6) {
        if i > 0 {
            path.push('-');
        }
        let w = rng.word(words);
        path.extend(
            w.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase()),
        );
    }
    let _ = write!(path, "-{}", rng.between(10_000_000, 39_999_999));
    let display: String = if path.chars().count() > 26 {
        path.chars()
            .take(26)
            .chain(std::iter::once('\u{2026}'))
            .collect()
    } else {
        path.clone()
    };
    let host = if rng.chance(0.8) {
        "http://"
    } else {
        "https://"
    };
    UrlEnt {
        url,
        expanded: format!("{host}{path}"),
        display: display.trim_start_matches("www.").to_string(),
        start,
        end: tb.n,
    }
}

fn media(rng: &mut Rng, tb: &mut TextBuf, owner: &str, status_id: u64, ms: i64) -> Media {
    tb.space();
    let url = tco(rng, ms / 1000);
    let start = tb.n;
    tb.push(&url);
    let mut key = String::new();
    rng.alnum(&mut key, 15);
    let (w, h) = match rng.below(4) {
        0 => (1024, rng.between(400, 1024) as u32),
        1 => (rng.between(400, 1024) as u32, 1024),
        2 => (600, rng.between(300, 800) as u32),
        _ => (rng.between(320, 1024) as u32, rng.between(240, 768) as u32),
    };
    let low = rng.next();
    let id = snowflake(ms - rng.between(300, 60_000), low);
    let mut more = Vec::new();
    if rng.chance(0.25) {
        for k in 1..=rng.between(1, 3) {
            let mut key = String::new();
            rng.alnum(&mut key, 15);
            more.push((
                id + k as u64 * 4096 + rng.below(4096),
                key,
                1024,
                rng.between(400, 1024) as u32,
            ));
        }
    }
    Media {
        id,
        key,
        url,
        owner: owner.to_string(),
        status_id,
        w,
        h,
        start,
        end: tb.n,
        from: None,
        more,
    }
}

fn mention(tb: &mut TextBuf, id: u64, screen_name: &str, name: &str) -> Mention {
    let start = tb.n;
    tb.push("@");
    tb.push(screen_name);
    Mention {
        id,
        screen_name: screen_name.to_string(),
        name: name.to_string(),
        start,
        end: tb.n,
    }
}

fn words_for(v: &Vocab, lang: Lang) -> &[&'static str] {
    match lang {
        Lang::En => &v.en,
        Lang::De => &v.de,
        Lang::Fr => &v.fr,
        Lang::Es => &v.es,
        Lang::Ja => &v.ja,
    }
}

/// Free text of about `budget` code points: sentences of words in `lang`
/// with event keywords mixed in, and the requested quirks.
struct Quirks {
    newline: bool,
    entity: bool,
    emoji: bool,
    typographic: bool,
    question: bool,
}

fn body(
    rng: &mut Rng,
    v: &Vocab,
    ev: usize,
    lang: Lang,
    tb: &mut TextBuf,
    budget: usize,
    q: &Quirks,
) {
    let words = words_for(v, lang);
    let start = tb.n;
    let mut in_sentence = 0;
    let mut newline_done = !q.newline;
    let mut entity_done = !q.entity;
    let mut quote_open = false;
    if q.typographic && rng.chance(0.4) {
        tb.space();
        tb.push("\u{201c}");
        quote_open = true;
    }
    while tb.n - start < budget {
        let w: &str = if rng.chance(0.1) {
            rng.word(&v.keywords[ev])
        } else {
            rng.word(words)
        };
        if lang == Lang::Ja {
            if in_sentence > 0 && rng.chance(0.2) {
                tb.push("\u{3001}");
            }
        } else if !quote_open || !tb.s.ends_with('\u{201c}') {
            tb.space();
        }
        if in_sentence == 0 && lang != Lang::Ja && rng.chance(0.5) {
            let mut cs = w.chars();
            if let Some(c) = cs.next() {
                tb.push(&c.to_uppercase().collect::<String>());
                tb.push(cs.as_str());
            }
        } else {
            tb.push(w);
        }
        in_sentence += 1;
        if !entity_done && tb.n - start > budget / 3 {
            tb.push(rng.word(&[" &amp;", " &amp;", " &gt;", " &lt;3", " -&gt;"]));
            entity_done = true;
        }
        if in_sentence >= 4 && rng.chance(0.2) {
            if lang == Lang::Ja {
                tb.push(rng.word(&["\u{3002}", "\u{ff01}", "\u{ff1f}"]));
            } else {
                tb.push(rng.word(&[".", ".", "!", ",", "...", "!!", ":"]));
            }
            in_sentence = 0;
            if !newline_done && tb.n - start > budget / 2 {
                tb.push(if rng.chance(0.7) { "\n" } else { "\n\n" });
                newline_done = true;
            }
        }
    }
    if !newline_done {
        tb.push("\n");
        tb.push(rng.word(words));
    }
    if quote_open {
        tb.push("\u{201d}");
    } else if q.typographic {
        tb.push(rng.word(&["\u{2026}", " \u{2014} really", "\u{2019}s", " \u{2013} wow"]));
    }
    if q.question {
        tb.push(rng.word(&["?", "?", "??", "?!", " ?"]));
    } else if rng.chance(0.5) {
        tb.push(rng.word(&[".", "!", "!!!", "..."]));
    }
    if q.emoji {
        tb.push(" ");
        let e = if rng.chance(0.5) {
            rng.word(&v.astral)
        } else {
            rng.word(&v.bmp_emoji)
        };
        for _ in 0..rng.between(1, 3) {
            tb.push(e);
        }
    }
}

fn pick_lang(rng: &mut Rng, ev: &Event) -> Lang {
    let x = rng.unit();
    if x < ev.de {
        Lang::De
    } else if x < ev.de + ev.fr {
        Lang::Fr
    } else if x < ev.de + ev.fr + 0.006 {
        Lang::Es
    } else if x < ev.de + ev.fr + 0.011 {
        Lang::Ja
    } else {
        Lang::En
    }
}

fn quirks(rng: &mut Rng, question: f64) -> Quirks {
    Quirks {
        newline: rng.chance(0.05),
        entity: rng.chance(0.04),
        emoji: rng.chance(0.04),
        typographic: rng.chance(0.025),
        question: rng.chance(question),
    }
}

fn screen_name_from(rng: &mut Rng, v: &Vocab, name: &str) -> String {
    let mut s = String::new();
    match rng.below(5) {
        0 => {
            s.push_str(rng.word(&v.first));
            s.push_str(rng.word(&v.last));
        }
        1 => {
            s.push_str(rng.word(&v.first));
            s.push('_');
            s.push_str(rng.word(&v.last));
        }
        2 => {
            s.push_str(&rng.word(&v.first).to_lowercase());
            let _ = write!(s, "{}", rng.between(1, 2014));
        }
        3 => {
            s.extend(name.chars().filter(char::is_ascii_alphanumeric));
            if s.is_empty() {
                s.push_str(rng.word(&v.last));
            }
            let _ = write!(s, "{}", rng.between(0, 99));
        }
        _ => {
            let n = rng.between(6, 12) as usize;
            rng.alnum(&mut s, n);
            s = s.to_lowercase();
        }
    }
    s.truncate(15);
    s
}

fn display_name(rng: &mut Rng, v: &Vocab, lang: Lang) -> String {
    let native = match lang {
        Lang::De => Some(&v.de_names),
        Lang::Fr => Some(&v.fr_names),
        Lang::Es => Some(&v.es_names),
        Lang::Ja => Some(&v.ja_names),
        Lang::En => None,
    };
    if let Some(names) = native
        && rng.chance(0.6)
    {
        return (*rng.pick(names)).to_string();
    }
    match rng.below(20) {
        0..=9 => format!("{} {}", rng.word(&v.first), rng.word(&v.last)),
        10..=12 => (rng.word(&v.first)).to_string(),
        13 => format!("{} {}", rng.word(&v.first), rng.word(&v.last)).to_uppercase(),
        14 => format!("{} {}", rng.word(&v.first), rng.word(&v.last)).to_lowercase(),
        15 => format!(
            "{} {} {}",
            rng.word(&v.first),
            rng.word(&v.bmp_emoji),
            rng.word(&v.last)
        ),
        16 => format!("{} {}", rng.word(&v.first), rng.word(&v.astral)),
        _ => (rng.word(&v.nick)).to_string(),
    }
}

fn bio(rng: &mut Rng, v: &Vocab, lang: Lang, secs: i64, urls: &mut Vec<UrlEnt>) -> String {
    let pool = match lang {
        Lang::De if rng.chance(0.7) => &v.bio_de,
        Lang::Fr if rng.chance(0.7) => &v.bio_fr,
        _ => &v.bio_en,
    };
    let mut tb = TextBuf::default();
    let target = rng.between(20, 160) as usize;
    while tb.n < target {
        if tb.n > 0 {
            tb.push(rng.word(&[". ", " | ", ", ", " \u{2022} ", ". ", " \n", " "]));
        }
        tb.push(rng.word(pool));
    }
    if rng.chance(0.05) {
        tb.push(" ");
        tb.push(if rng.chance(0.6) {
            rng.word(&v.astral)
        } else {
            rng.word(&v.bmp_emoji)
        });
    }
    if rng.chance(0.08) && tb.n < 130 {
        let owned = tb.s.clone();
        let words: Vec<&str> = owned.split_whitespace().collect();
        let mut r2 = Rng::new(rng.next());
        let u = link(&mut r2, v, &mut tb, secs, &words);
        urls.push(u);
    }
    tb.s
}

fn colors(rng: &mut Rng, v: &Vocab, default: bool) -> [&'static str; 5] {
    if default {
        ["333333", "DDEEF6", "C0DEED", "C0DEED", "0084B4"]
    } else {
        [
            rng.word(&v.colors),
            rng.word(&v.colors),
            rng.word(&v.colors),
            rng.word(&v.colors),
            rng.word(&v.colors),
        ]
    }
}

/// A random account seen tweeting at `at`.
fn random_user(rng: &mut Rng, v: &Vocab, at: i64, lang: Lang, shape: UserShape) -> User {
    let age = if rng.chance(0.08) {
        rng.between(2 * DAY, 365 * DAY)
    } else {
        rng.between(365 * DAY, 3100 * DAY)
    };
    let created = (at - age).max(1_142_899_200 + rng.between(0, 300 * DAY));
    let id = user_id_at(created) + rng.below(400_000);
    let name = display_name(rng, v, lang);
    let screen_name = screen_name_from(rng, v, &name);
    let mut desc_urls = Vec::new();
    let description = if rng.chance(0.0002) {
        None
    } else if rng.chance(0.15) {
        Some(String::new())
    } else {
        Some(bio(rng, v, lang, at, &mut desc_urls))
    };
    let url = if rng.chance(0.34) {
        let mut tb = TextBuf::default();
        let words = [screen_name.as_str(), "blog", "home"];
        let mut u = link(rng, v, &mut tb, at, &words);
        u.start = 0;
        u.expanded = format!("http://www.{}.com", screen_name.to_lowercase());
        u.display = format!("{}.com", screen_name.to_lowercase());
        Some(u)
    } else {
        None
    };
    let verified = rng.chance(0.015);
    let mut followers = rng.count(250.0, 1.7);
    if verified {
        followers = followers * 100 + 10_000;
    }
    let default_profile = rng.chance(0.32);
    finish_user(
        rng,
        v,
        UserSeed {
            id,
            screen_name,
            name,
            description,
            desc_urls,
            url,
            created,
            followers,
            verified,
            default_profile,
            lang,
            shape,
            at,
        },
    )
}

struct UserSeed {
    id: u64,
    screen_name: String,
    name: String,
    description: Option<String>,
    desc_urls: Vec<UrlEnt>,
    url: Option<UrlEnt>,
    created: i64,
    followers: u64,
    verified: bool,
    default_profile: bool,
    lang: Lang,
    shape: UserShape,
    at: i64,
}

fn finish_user(rng: &mut Rng, v: &Vocab, s: UserSeed) -> User {
    let friends = rng.count(350.0, 1.2);
    let statuses = rng.count(4000.0, 1.6).max(1);
    let favourites = if rng.chance(0.08) {
        0
    } else {
        rng.count(400.0, 1.8)
    };
    let listed = if rng.chance(0.17) {
        0
    } else {
        s.followers / rng.between(20, 120) as u64 + rng.between(1, 5) as u64
    };
    let default_image = rng.chance(0.03);
    let image = if default_image {
        format!(
            "pbs.twimg.com/sticky/default_profile_images/default_profile_{}_normal.png",
            rng.below(7)
        )
    } else {
        let t = rng.between(s.created.max(1_356_998_400), s.at) * 1000;
        let low = rng.next();
        let mut key = String::new();
        rng.alnum(&mut key, 8);
        let ext = *rng.pick(&["jpeg", "jpg", "jpg", "png"]);
        format!(
            "pbs.twimg.com/profile_images/{}/{key}_normal.{ext}",
            snowflake(t, low)
        )
    };
    let bg_image = if s.default_profile {
        "abs.twimg.com/images/themes/theme1/bg.png".to_string()
    } else if rng.chance(0.4) {
        format!(
            "abs.twimg.com/images/themes/theme{}/bg.{}",
            rng.between(2, 18),
            if rng.chance(0.7) { "gif" } else { "png" }
        )
    } else {
        let mut key = String::new();
        let n = rng.between(8, 32) as usize;
        rng.alnum(&mut key, n);
        format!(
            "pbs.twimg.com/profile_background_images/{}/{key}.jpeg",
            rng.between(100_000_000, 599_999_999_999_999_999)
        )
    };
    let time_zone = if rng.chance(0.33) {
        None
    } else {
        Some(*rng.pick(TIME_ZONES))
    };
    User {
        id: s.id,
        screen_name: s.screen_name,
        name: s.name,
        description: s.description,
        desc_urls: s.desc_urls,
        url: s.url,
        location: if rng.chance(0.25) {
            ""
        } else {
            rng.word(&v.locations)
        },
        time_zone,
        created: s.created,
        followers: s.followers,
        friends,
        statuses,
        favourites,
        listed,
        verified: s.verified,
        geo_enabled: rng.chance(0.45),
        use_bg_image: rng.chance(0.88),
        bg_tile: !s.default_profile && rng.chance(0.5),
        default_profile: s.default_profile,
        default_image,
        translator: rng.chance(0.005),
        colors: colors(rng, v, s.default_profile),
        bg_image,
        image,
        banner: if rng.chance(0.87) {
            Some(rng.between(s.created.max(1_338_508_800), s.at))
        } else {
            None
        },
        lang: if s.lang == Lang::En && rng.chance(0.1) {
            "en-gb"
        } else {
            s.lang.code()
        },
        shape: s.shape,
    }
}

/// A news account: the same id, names and creation date in every thread of
/// a run; its counts move a little from thread to thread.
fn news_user(
    rng: &mut Rng,
    ctx: &Ctx,
    entry: &(&str, &str, f64),
    lang: Lang,
    at: i64,
    shape: UserShape,
) -> User {
    let v = &ctx.v;
    let (screen_name, name, followers) = *entry;
    let mut base = Rng::derive(ctx.seed, screen_name, 0);
    let created = base.between(1_167_609_600, 1_293_840_000);
    let id = user_id_at(created) + base.below(400_000);
    let mut desc_urls = Vec::new();
    let mut tb = TextBuf::default();
    tb.push(base.word(&v.bio_news));
    tb.push(". ");
    tb.push(base.word(&v.bio_news));
    tb.push(".");
    if base.chance(0.4) {
        let words: Vec<&str> = name.split_whitespace().collect();
        desc_urls.push(link(&mut base, v, &mut tb, 1_400_000_000, &words));
    }
    let mut url = TextBuf::default();
    let mut home = link(&mut base, v, &mut url, 1_400_000_000, &[screen_name]);
    home.expanded = format!("http://www.{}.com", screen_name.to_lowercase());
    home.display = format!("{}.com", screen_name.to_lowercase());
    let mut u = finish_user(
        &mut base,
        v,
        UserSeed {
            id,
            screen_name: screen_name.to_string(),
            name: name.to_string(),
            description: Some(tb.s),
            desc_urls,
            url: Some(home),
            created,
            followers: 0,
            verified: true,
            default_profile: false,
            lang,
            shape,
            at: 1_400_000_000,
        },
    );
    u.followers = (followers * (0.97 + 0.06 * rng.unit())) as u64;
    u.listed = u.followers / 60 + rng.below(500);
    u.statuses = u.statuses * 20 + (at - 1_400_000_000) as u64 / 300 + rng.below(50);
    u.friends /= 3;
    u.geo_enabled = false;
    u.use_bg_image = true;
    u
}

#[derive(Clone, Copy)]
struct Mix {
    max_tags: u32,
    tag: f64,
    url: f64,
    media: f64,
}

fn new_tweet(id: u64, secs: i64, client: usize, user: User, lang: Lang) -> Tweet {
    Tweet {
        id,
        secs,
        text: String::new(),
        client,
        reply_to: None,
        mentions: Vec::new(),
        hashtags: Vec::new(),
        urls: Vec::new(),
        media: None,
        retweet_count: 0,
        favorite_count: 0,
        lang: lang.code(),
        sensitive: None,
        geo: None,
        place: None,
        user,
        retweeted: None,
    }
}

/// Hashtags, links, photo, geo: everything after the words.
fn decorate(rng: &mut Rng, v: &Vocab, ev: usize, mut tb: TextBuf, t: &mut Tweet, mix: Mix) {
    for _ in 0..mix.max_tags {
        if rng.chance(mix.tag) {
            tb.space();
            let tag = rng.word(&v.tags[ev]);
            let start = tb.n;
            tb.push("#");
            tb.push(tag);
            t.hashtags.push((tag.to_string(), start, tb.n));
        }
    }
    if rng.chance(mix.url) {
        let words = v.keywords[ev].clone();
        t.urls.push(link(rng, v, &mut tb, t.secs, &words));
        if rng.chance(0.1) {
            t.urls.push(link(rng, v, &mut tb, t.secs, &words));
        }
    }
    if rng.chance(mix.media) {
        t.media = Some(media(
            rng,
            &mut tb,
            &t.user.screen_name,
            t.id,
            t.secs * 1000,
        ));
        if tb.n < 40 && rng.chance(0.5) {
            t.lang = "und";
        }
    }
    if !t.urls.is_empty() || t.media.is_some() {
        t.sensitive = Some((rng.chance(0.01), rng.chance(0.1)));
    }
    if rng.chance(0.04) {
        let p = rng.below(PLACES.len() as u64) as usize;
        t.place = Some(p);
        if rng.chance(0.55) {
            let [w, s, e, n] = PLACES[p].bbox;
            t.geo = Some((w + (e - w) * rng.unit(), s + (n - s) * rng.unit()));
        }
    }
    t.text = tb.s;
}

fn source_tweet(
    rng: &mut Rng,
    v: &Vocab,
    ev: usize,
    lang: Lang,
    user: User,
    ms: i64,
    low: u64,
) -> Tweet {
    let client = v.client(rng);
    let mut t = new_tweet(snowflake(ms, low), ms / 1000, client, user, lang);
    let mut tb = TextBuf::default();
    if rng.chance(0.15) {
        tb.push(if lang == Lang::De {
            "EIL: "
        } else {
            "BREAKING: "
        });
    }
    let q = quirks(rng, 0.1);
    let budget = rng.between(40, 95) as usize;
    body(rng, v, ev, lang, &mut tb, budget, &q);
    decorate(
        rng,
        v,
        ev,
        tb,
        &mut t,
        Mix {
            max_tags: 2,
            tag: 0.45,
            url: 0.45,
            media: 0.28,
        },
    );
    t.retweet_count = rng.count(100.0, 1.5);
    t.favorite_count = rng.count(50.0, 1.6);
    t
}

/// Who and what an earlier reply was, for nested replies.
struct Earlier {
    id: u64,
    user: User,
}

struct ReplyCtx<'a> {
    v: &'a Vocab,
    ev: usize,
    source: &'a Tweet,
}

fn reply(
    rng: &mut Rng,
    c: &ReplyCtx,
    parent: Option<&Earlier>,
    user: User,
    ms: i64,
    low: u64,
) -> Tweet {
    let v = c.v;
    let src = c.source;
    let lang = if rng.chance(0.3) {
        match src.lang {
            "de" => Lang::De,
            "fr" => Lang::Fr,
            "es" => Lang::Es,
            "ja" => Lang::Ja,
            _ => Lang::En,
        }
    } else {
        pick_lang(rng, &EVENTS[c.ev])
    };
    let client = v.client(rng);
    let mut t = new_tweet(snowflake(ms, low), ms / 1000, client, user, lang);
    let su = &src.user;
    let mut tb = TextBuf::default();
    let budget = rng.between(20, 115) as usize;
    match parent {
        Some(p) => {
            t.reply_to = Some((p.id, p.user.id, p.user.screen_name.clone()));
            t.mentions.push(mention(
                &mut tb,
                p.user.id,
                &p.user.screen_name,
                &p.user.name,
            ));
            if rng.chance(0.8) && p.user.id != su.id {
                tb.space();
                t.mentions
                    .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
            }
        }
        None => {
            t.reply_to = Some((src.id, su.id, su.screen_name.clone()));
            if rng.chance(0.02) {
                // Old-style quote: “@Source: text…” comment
                tb.push("\u{201c}");
                t.mentions
                    .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
                tb.push(": ");
                let quoted: String = src
                    .text
                    .chars()
                    .take(rng.between(20, 70) as usize)
                    .collect();
                tb.push(&quoted);
                tb.push("\u{201d}");
            } else if rng.chance(0.92) {
                t.mentions
                    .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
            }
        }
    }
    for p in [0.35, 0.1] {
        if rng.chance(p) {
            tb.space();
            let name = display_name(rng, v, Lang::En);
            let screen = screen_name_from(rng, v, &name);
            let id = user_id_at(rng.between(1_167_609_600, 1_410_000_000));
            t.mentions.push(mention(&mut tb, id, &screen, &name));
        }
    }
    let q = quirks(rng, 0.22);
    body(rng, v, c.ev, lang, &mut tb, budget, &q);
    decorate(
        rng,
        v,
        c.ev,
        tb,
        &mut t,
        Mix {
            max_tags: 1,
            tag: 0.1,
            url: 0.1,
            media: 0.075,
        },
    );
    t.retweet_count = if rng.chance(0.88) {
        0
    } else {
        rng.count(2.0, 1.2).max(1)
    };
    t.favorite_count = if rng.chance(0.72) {
        0
    } else {
        rng.count(2.0, 1.2).max(1)
    };
    t
}

fn retweet(rng: &mut Rng, v: &Vocab, src: &Tweet, user: User, ms: i64, low: u64) -> Tweet {
    let client = v.client(rng);
    let mut t = new_tweet(snowflake(ms, low), ms / 1000, client, user, Lang::En);
    let su = &src.user;
    let mut tb = TextBuf::default();
    tb.push("RT ");
    t.mentions
        .push(mention(&mut tb, su.id, &su.screen_name, &su.name));
    tb.push(": ");
    let shift = tb.n;
    tb.push(&src.text);
    if tb.n > 140 {
        tb.s =
            tb.s.chars()
                .take(139)
                .chain(std::iter::once('\u{2026}'))
                .collect();
        tb.n = 140;
    }
    let fits = |end: usize| end + shift <= tb.n;
    t.mentions.extend(
        src.mentions
            .iter()
            .filter(|m| fits(m.end))
            .map(|m| Mention {
                start: m.start + shift,
                end: m.end + shift,
                ..m.clone()
            }),
    );
    t.hashtags.extend(
        src.hashtags
            .iter()
            .filter(|h| fits(h.2))
            .map(|h| (h.0.clone(), h.1 + shift, h.2 + shift)),
    );
    t.urls
        .extend(src.urls.iter().filter(|u| fits(u.end)).map(|u| UrlEnt {
            start: u.start + shift,
            end: u.end + shift,
            ..u.clone()
        }));
    t.media = src.media.as_ref().map(|m| Media {
        start: m.start + shift,
        end: m.end + shift,
        from: m.from.or(Some((src.id, su.id))),
        ..m.clone()
    });
    t.text = tb.s;
    t.lang = src.lang;
    t.sensitive = src.sensitive;
    t.retweet_count = src.retweet_count;
    if rng.chance(0.01) {
        let p = rng.below(PLACES.len() as u64) as usize;
        t.place = Some(p);
    }
    t.retweeted = Some(Box::new(src.clone()));
    t
}

// ---------------------------------------------------------------------------
// JSON output in Twitter's own style: compact, `\/`, `\uXXXX` for non-ASCII.

#[derive(Default)]
struct J {
    b: String,
}

impl J {
    fn sep(&mut self) {
        if let Some(&c) = self.b.as_bytes().last()
            && !matches!(c, b'{' | b'[' | b':')
        {
            self.b.push(',');
        }
    }

    fn k(&mut self, key: &str) -> &mut Self {
        self.sep();
        self.b.push('"');
        self.b.push_str(key);
        self.b.push_str("\":");
        self
    }

    fn s(&mut self, v: &str) -> &mut Self {
        self.sep();
        self.b.push('"');
        for c in v.chars() {
            match c {
                '"' => self.b.push_str("\\\""),
                '\\' => self.b.push_str("\\\\"),
                '/' => self.b.push_str("\\/"),
                '\n' => self.b.push_str("\\n"),
                '\r' => self.b.push_str("\\r"),
                '\t' => self.b.push_str("\\t"),
                c if c.is_ascii() && c >= ' ' => self.b.push(c),
                c => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(self.b, "\\u{u:04x}");
                    }
                }
            }
        }
        self.b.push('"');
        self
    }

    fn os(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.s(v),
            None => self.null(),
        }
    }

    fn u(&mut self, v: u64) -> &mut Self {
        self.sep();
        let _ = write!(self.b, "{v}");
        self
    }

    fn i(&mut self, v: i64) -> &mut Self {
        self.sep();
        let _ = write!(self.b, "{v}");
        self
    }

    fn ou(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(v) => self.u(v),
            None => self.null(),
        }
    }

    /// A coordinate with at most 8 decimals, like Twitter's.
    fn f(&mut self, v: f64) -> &mut Self {
        self.sep();
        let s = format!("{v:.8}");
        self.b
            .push_str(s.trim_end_matches('0').trim_end_matches('.'));
        self
    }

    fn bool(&mut self, v: bool) -> &mut Self {
        self.sep();
        self.b.push_str(if v { "true" } else { "false" });
        self
    }

    fn null(&mut self) -> &mut Self {
        self.sep();
        self.b.push_str("null");
        self
    }

    fn time(&mut self, secs: i64) -> &mut Self {
        self.sep();
        self.b.push('"');
        twitter_time(&mut self.b, secs);
        self.b.push('"');
        self
    }

    fn o(&mut self) -> &mut Self {
        self.sep();
        self.b.push('{');
        self
    }

    fn oe(&mut self) -> &mut Self {
        self.b.push('}');
        self
    }

    fn a(&mut self) -> &mut Self {
        self.sep();
        self.b.push('[');
        self
    }

    fn ae(&mut self) -> &mut Self {
        self.b.push(']');
        self
    }
}

fn write_url(j: &mut J, u: &UrlEnt) {
    j.o().k("url").s(&u.url);
    j.k("indices").a().u(u.start as u64).u(u.end as u64).ae();
    j.k("expanded_url")
        .s(&u.expanded)
        .k("display_url")
        .s(&u.display)
        .oe();
}

#[derive(Clone, Copy)]
enum UF {
    FollowReq,
    UseBg,
    TextColor,
    DefaultImg,
    Id,
    BgHttps,
    Verified,
    ProfileLocation,
    ImgHttps,
    SidebarFill,
    Entities,
    Followers,
    SidebarBorder,
    IdStr,
    BgColor,
    Listed,
    TransEnabled,
    UtcOffset,
    Statuses,
    Description,
    Friends,
    Location,
    LinkColor,
    Img,
    Following,
    GeoEnabled,
    Banner,
    BgImg,
    Name,
    Lang,
    BgTile,
    Favourites,
    ScreenName,
    Notifications,
    Url,
    CreatedAt,
    ContributorsEnabled,
    TimeZone,
    Protected,
    DefaultProfile,
    IsTranslator,
}

use UF::*;

const ORDER_WITH_LOCATION: [UF; 41] = [
    FollowReq,
    UseBg,
    TextColor,
    DefaultImg,
    Id,
    BgHttps,
    Verified,
    ProfileLocation,
    ImgHttps,
    SidebarFill,
    Entities,
    Followers,
    SidebarBorder,
    IdStr,
    BgColor,
    Listed,
    TransEnabled,
    UtcOffset,
    Statuses,
    Description,
    Friends,
    Location,
    LinkColor,
    Img,
    Following,
    GeoEnabled,
    Banner,
    BgImg,
    Name,
    Lang,
    BgTile,
    Favourites,
    ScreenName,
    Notifications,
    Url,
    CreatedAt,
    ContributorsEnabled,
    TimeZone,
    Protected,
    DefaultProfile,
    IsTranslator,
];

const ORDER_PLAIN: [UF; 40] = [
    FollowReq,
    UseBg,
    DefaultImg,
    Id,
    BgHttps,
    Verified,
    TextColor,
    ImgHttps,
    SidebarFill,
    Entities,
    Followers,
    SidebarBorder,
    IdStr,
    BgColor,
    Listed,
    TransEnabled,
    UtcOffset,
    Statuses,
    Description,
    Friends,
    Location,
    LinkColor,
    Img,
    Following,
    GeoEnabled,
    Banner,
    BgImg,
    ScreenName,
    Lang,
    BgTile,
    Favourites,
    Name,
    Notifications,
    Url,
    CreatedAt,
    ContributorsEnabled,
    TimeZone,
    Protected,
    DefaultProfile,
    IsTranslator,
];

fn write_user(j: &mut J, u: &User) {
    let order: &[UF] = if u.shape == UserShape::WithLocation {
        &ORDER_WITH_LOCATION
    } else {
        &ORDER_PLAIN
    };
    let old = u.shape == UserShape::Old;
    let [text, fill, border, bg, link] = u.colors;
    j.o();
    for &f in order {
        match f {
            FollowReq => j.k("follow_request_sent").bool(false),
            UseBg => j.k("profile_use_background_image").bool(u.use_bg_image),
            TextColor => j.k("profile_text_color").s(text),
            DefaultImg => j.k("default_profile_image").bool(u.default_image),
            Id => j.k("id").u(u.id),
            BgHttps => j
                .k("profile_background_image_url_https")
                .s(&format!("https://{}", u.bg_image)),
            Verified => j.k("verified").bool(u.verified),
            ProfileLocation => j.k("profile_location").null(),
            ImgHttps => j
                .k("profile_image_url_https")
                .s(&format!("https://{}", u.image)),
            SidebarFill => j.k("profile_sidebar_fill_color").s(fill),
            Entities if old => j,
            Entities => {
                j.k("entities").o();
                if let Some(url) = &u.url {
                    j.k("url").o().k("urls").a();
                    write_url(j, url);
                    j.ae().oe();
                }
                j.k("description").o().k("urls").a();
                for d in &u.desc_urls {
                    write_url(j, d);
                }
                j.ae().oe().oe()
            }
            Followers => j.k("followers_count").u(u.followers),
            SidebarBorder => j.k("profile_sidebar_border_color").s(border),
            IdStr => j.k("id_str").s(&u.id.to_string()),
            BgColor => j.k("profile_background_color").s(bg),
            Listed => j.k("listed_count").u(u.listed),
            TransEnabled if old => j,
            TransEnabled => j.k("is_translation_enabled").bool(false),
            UtcOffset => match u.time_zone {
                Some((_, off)) => j.k("utc_offset").i(i64::from(off)),
                None => j.k("utc_offset").null(),
            },
            Statuses => j.k("statuses_count").u(u.statuses),
            Description => j.k("description").os(u.description.as_deref()),
            Friends => j.k("friends_count").u(u.friends),
            Location => j.k("location").s(u.location),
            LinkColor => j.k("profile_link_color").s(link),
            Img => j.k("profile_image_url").s(&format!("http://{}", u.image)),
            Following => j.k("following").bool(false),
            GeoEnabled => j.k("geo_enabled").bool(u.geo_enabled),
            Banner => match u.banner {
                Some(t) => j.k("profile_banner_url").s(&format!(
                    "https://pbs.twimg.com/profile_banners/{}/{t}",
                    u.id
                )),
                None => j,
            },
            BgImg => j
                .k("profile_background_image_url")
                .s(&format!("http://{}", u.bg_image)),
            Name => j.k("name").s(&u.name),
            Lang => j.k("lang").s(u.lang),
            BgTile => j.k("profile_background_tile").bool(u.bg_tile),
            Favourites => j.k("favourites_count").u(u.favourites),
            ScreenName => j.k("screen_name").s(&u.screen_name),
            Notifications => j.k("notifications").bool(false),
            Url => j.k("url").os(u.url.as_ref().map(|x| x.url.as_str())),
            CreatedAt => j.k("created_at").time(u.created),
            ContributorsEnabled => j.k("contributors_enabled").bool(false),
            TimeZone => j.k("time_zone").os(u.time_zone.map(|z| z.0)),
            Protected => j.k("protected").bool(false),
            DefaultProfile => j.k("default_profile").bool(u.default_profile),
            IsTranslator => j.k("is_translator").bool(u.translator),
        };
    }
    j.oe();
}

fn fit(w: u32, h: u32, max: u32) -> (u32, u32) {
    if w <= max && h <= max {
        (w, h)
    } else if w >= h {
        (max, h * max / w)
    } else {
        (w * max / h, max)
    }
}

fn write_media(j: &mut J, m: &Media) {
    j.o();
    if let Some((status, user)) = m.from {
        j.k("source_user_id")
            .u(user)
            .k("source_status_id_str")
            .s(&status.to_string());
    }
    j.k("expanded_url").s(&format!(
        "http://twitter.com/{}/status/{}/photo/1",
        m.owner, m.status_id
    ));
    let short = &m.url[m.url.len() - 10..];
    j.k("display_url").s(&format!("pic.twitter.com/{short}"));
    j.k("url").s(&m.url);
    j.k("media_url_https")
        .s(&format!("https://pbs.twimg.com/media/{}.jpg", m.key));
    if let Some((status, user)) = m.from {
        j.k("source_user_id_str")
            .s(&user.to_string())
            .k("source_status_id")
            .u(status);
    }
    j.k("id_str").s(&m.id.to_string());
    j.k("sizes").o();
    for (name, (w, h), resize) in [
        ("small", fit(m.w, m.h, 340), "fit"),
        ("large", fit(m.w, m.h, 1024), "fit"),
        ("medium", fit(m.w, m.h, 600), "fit"),
        ("thumb", (150, 150), "crop"),
    ] {
        j.k(name)
            .o()
            .k("h")
            .u(u64::from(h))
            .k("resize")
            .s(resize)
            .k("w")
            .u(u64::from(w))
            .oe();
    }
    j.oe();
    j.k("indices").a().u(m.start as u64).u(m.end as u64).ae();
    j.k("type").s("photo").k("id").u(m.id);
    j.k("media_url")
        .s(&format!("http://pbs.twimg.com/media/{}.jpg", m.key));
    j.oe();
}

fn write_point(j: &mut J, a: f64, b: f64) {
    j.o()
        .k("type")
        .s("Point")
        .k("coordinates")
        .a()
        .f(a)
        .f(b)
        .ae()
        .oe();
}

fn write_place(j: &mut J, p: &Place) {
    let [w, s, e, n] = p.bbox;
    j.o().k("full_name").s(p.full_name);
    j.k("url")
        .s(&format!("https://api.twitter.com/1.1/geo/id/{}.json", p.id));
    j.k("country").s(p.country).k("place_type").s("city");
    j.k("bounding_box")
        .o()
        .k("type")
        .s("Polygon")
        .k("coordinates")
        .a()
        .a();
    for (x, y) in [(w, s), (e, s), (e, n), (w, n)] {
        j.a().f(x).f(y).ae();
    }
    j.ae().ae().oe();
    j.k("contained_within")
        .a()
        .ae()
        .k("country_code")
        .s(p.code)
        .k("attributes")
        .o()
        .oe();
    j.k("id").s(p.id).k("name").s(p.name).oe();
}

fn write_tweet(j: &mut J, t: &Tweet) {
    let reply = t.reply_to.as_ref();
    j.o();
    j.k("contributors")
        .null()
        .k("truncated")
        .bool(false)
        .k("text")
        .s(&t.text);
    j.k("in_reply_to_status_id").ou(reply.map(|r| r.0));
    j.k("id").u(t.id).k("favorite_count").u(t.favorite_count);
    j.k("source")
        .s(CLIENTS[t.client].0)
        .k("retweeted")
        .bool(false);
    match t.geo {
        Some((lon, lat)) => write_point(j.k("coordinates"), lon, lat),
        None => {
            j.k("coordinates").null();
        }
    }
    j.k("entities").o().k("symbols").a().ae();
    j.k("user_mentions").a();
    for m in &t.mentions {
        j.o()
            .k("id")
            .u(m.id)
            .k("indices")
            .a()
            .u(m.start as u64)
            .u(m.end as u64)
            .ae();
        j.k("id_str")
            .s(&m.id.to_string())
            .k("screen_name")
            .s(&m.screen_name)
            .k("name")
            .s(&m.name)
            .oe();
    }
    j.ae().k("hashtags").a();
    for (tag, start, end) in &t.hashtags {
        j.o()
            .k("indices")
            .a()
            .u(*start as u64)
            .u(*end as u64)
            .ae()
            .k("text")
            .s(tag)
            .oe();
    }
    j.ae().k("urls").a();
    for u in &t.urls {
        write_url(j, u);
    }
    j.ae();
    if let Some(m) = &t.media {
        j.k("media").a();
        write_media(j, m);
        j.ae();
    }
    j.oe();
    j.k("in_reply_to_screen_name")
        .os(reply.map(|r| r.2.as_str()));
    j.k("id_str")
        .s(&t.id.to_string())
        .k("retweet_count")
        .u(t.retweet_count);
    j.k("in_reply_to_user_id")
        .ou(reply.map(|r| r.1))
        .k("favorited")
        .bool(false);
    if let Some(rt) = &t.retweeted {
        j.k("retweeted_status");
        write_tweet(j, rt);
    }
    j.k("user");
    write_user(j, &t.user);
    match t.geo {
        Some((lon, lat)) => write_point(j.k("geo"), lat, lon),
        None => {
            j.k("geo").null();
        }
    }
    let reply_user = reply.map(|r| r.1.to_string());
    j.k("in_reply_to_user_id_str").os(reply_user.as_deref());
    if let Some((sensitive, appealable)) = t.sensitive {
        j.k("possibly_sensitive").bool(sensitive);
        if appealable {
            j.k("possibly_sensitive_appealable").bool(false);
        }
    }
    j.k("lang").s(t.lang).k("created_at").time(t.secs);
    let reply_status = reply.map(|r| r.0.to_string());
    j.k("in_reply_to_status_id_str").os(reply_status.as_deref());
    match t.place {
        Some(p) => write_place(j.k("place"), &PLACES[p]),
        None => {
            j.k("place").null();
        }
    }
    if let Some(m) = &t.media {
        j.k("extended_entities").o().k("media").a();
        write_media(j, m);
        for (id, key, w, h) in &m.more {
            let photo = Media {
                id: *id,
                key: key.clone(),
                w: *w,
                h: *h,
                more: Vec::new(),
                ..m.clone()
            };
            write_media(j, &photo);
        }
        j.ae().oe();
    }
    j.oe();
}

// ---------------------------------------------------------------------------
// Threads.

#[derive(Default, Clone, Copy)]
struct Stats {
    threads: u64,
    replies: u64,
    retweets: u64,
    files: u64,
    bytes: u64,
}

impl Stats {
    fn add(self, o: Stats) -> Stats {
        Stats {
            threads: self.threads + o.threads,
            replies: self.replies + o.replies,
            retweets: self.retweets + o.retweets,
            files: self.files + o.files,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// Replies per thread with any: a discretized log-normal (median 9.6, mean about 17).
const REPLIES_MEDIAN: f64 = 9.6;
const REPLIES_SIGMA: f64 = 1.1;
/// Share of threads without a reactions folder (PHEME: 677 of 6,425).
const NO_REACTIONS: f64 = 0.105;

fn event_of(j: u64) -> (usize, bool) {
    let mut start = 0;
    for (i, e) in EVENTS.iter().enumerate() {
        if j < start + e.threads {
            return (i, j - start < e.rumours);
        }
        start += e.threads;
    }
    (EVENTS.len() - 1, false)
}

fn make_dir(path: &Path) -> Result<(), String> {
    fs::create_dir_all(path).map_err(|e| format!("cannot create directory {}: {e}", path.display()))
}

/// Serializes `t` into `dir/<id>.json`, with a final newline half of the time.
fn emit(j: &mut J, dir: &Path, t: &Tweet, newline: bool, stats: &mut Stats) -> Result<(), String> {
    j.b.clear();
    write_tweet(j, t);
    if newline {
        j.b.push('\n');
    }
    let path = dir.join(format!("{}.json", t.id));
    fs::write(&path, j.b.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    stats.files += 1;
    stats.bytes += j.b.len() as u64;
    Ok(())
}

/// Strictly increasing times after `after`, in milliseconds, avoiding `taken`.
fn timeline(mut ms: Vec<i64>, after: i64, taken: &[i64]) -> Vec<i64> {
    ms.sort_unstable();
    let mut last = after;
    for t in &mut ms {
        *t = (*t).max(last + 1);
        while taken.binary_search(t).is_ok() {
            *t += 1;
        }
        last = *t;
    }
    ms
}

fn gen_thread(ctx: &Ctx, idx: u64, j: &mut J) -> Result<Stats, String> {
    let v = &ctx.v;
    let mut rng = Rng::derive(ctx.seed, "thread", idx);
    let (ev_i, rumour) = event_of(idx * PHEME_THREADS / ctx.n);
    let ev = &EVENTS[ev_i];
    // A bijection of the thread index: unique low id bits for every thread.
    let low = idx.wrapping_mul(0x9E37_79B1) & 0x3F_FFFF;
    let shape = match rng.below(100) {
        0..=46 => UserShape::WithLocation,
        47..=96 => UserShape::Plain,
        _ => UserShape::Old,
    };
    let src_folder = if rng.chance(0.8) {
        "source-tweets"
    } else {
        "source-tweet"
    };
    let x = rng.unit();
    let src_secs = ev.start + (ev.window as f64 * x * x.sqrt()) as i64;
    let src_ms = src_secs * 1000 + rng.between(0, 999);
    let lang = pick_lang(&mut rng, ev);

    let src_user = if rng.chance(0.65) {
        let entry = if rng.chance(0.5) {
            rng.pick(ev.news)
        } else {
            rng.pick(GLOBAL_NEWS)
        };
        let news_lang = if ev.de > 0.5 && ev.news.contains(entry) {
            Lang::De
        } else {
            Lang::En
        };
        news_user(&mut rng, ctx, entry, news_lang, src_secs, shape)
    } else {
        let mut u = random_user(&mut rng, v, src_secs, lang, shape);
        u.followers = u.followers * rng.between(5, 50) as u64 + 100;
        u
    };
    let source = source_tweet(&mut rng, v, ev_i, lang, src_user, src_ms, low);

    let replies = if rng.chance(NO_REACTIONS) {
        0
    } else {
        (rng.lognormal(REPLIES_MEDIAN, REPLIES_SIGMA).round() as u64).clamp(1, 5000)
    };
    let delays = (0..replies).map(|_| {
        src_ms
            + rng
                .lognormal(19.6 * 60_000.0, 2.2)
                .clamp(3_000.0, 15.0 * 86_400_000.0) as i64
    });
    let reply_ms = timeline(delays.collect(), src_ms, &[]);

    let label = if rumour { "rumours" } else { "non-rumours" };
    let dir = ctx
        .out
        .join(format!("{}-all-rnr-threads", ev.name))
        .join(label)
        .join(source.id.to_string());
    let mut stats = Stats {
        threads: 1,
        replies,
        ..Stats::default()
    };
    let sdir = dir.join(src_folder);
    make_dir(&sdir)?;
    emit(j, &sdir, &source, rng.chance(0.5), &mut stats)?;

    if replies > 0 {
        let rdir = dir.join("reactions");
        make_dir(&rdir)?;
        let c = ReplyCtx {
            v,
            ev: ev_i,
            source: &source,
        };
        let mut earlier: Vec<Earlier> = Vec::new();
        for &ms in &reply_ms {
            let secs = ms / 1000;
            let user = if rng.chance(0.03) {
                let mut u = source.user.clone();
                u.statuses += rng.below(20);
                u
            } else if !earlier.is_empty() && rng.chance(0.12) {
                let mut u = earlier[rng.below(earlier.len() as u64) as usize]
                    .user
                    .clone();
                u.statuses += rng.below(5);
                u
            } else {
                let ulang = if rng.chance(0.5) {
                    lang
                } else {
                    pick_lang(&mut rng, ev)
                };
                random_user(&mut rng, v, secs, ulang, shape)
            };
            let parent = if !earlier.is_empty() && rng.chance(0.25) {
                Some(&earlier[rng.below(earlier.len() as u64) as usize])
            } else {
                None
            };
            let t = reply(&mut rng, &c, parent, user, ms, low);
            emit(j, &rdir, &t, rng.chance(0.5), &mut stats)?;
            earlier.push(Earlier {
                id: t.id,
                user: t.user,
            });
        }
    }

    // Retweets come from their own stream, so that the replies are the same
    // whatever --retweets is.
    if ctx.retweets > 0.0 && replies > 0 {
        let mut rrng = Rng::derive(ctx.seed, "retweets", idx);
        let n = (ctx.retweets * replies as f64 + rrng.unit()) as u64;
        let delays = (0..n).map(|_| {
            src_ms
                + rrng
                    .lognormal(8.0 * 60_000.0, 1.8)
                    .clamp(1_000.0, 10.0 * 86_400_000.0) as i64
        });
        let rt_ms = timeline(delays.collect(), src_ms, &reply_ms);
        if n > 0 {
            let tdir = dir.join("retweets");
            make_dir(&tdir)?;
            for &ms in &rt_ms {
                let ulang = if rrng.chance(0.5) {
                    lang
                } else {
                    pick_lang(&mut rrng, ev)
                };
                let user = random_user(&mut rrng, v, ms / 1000, ulang, shape);
                let t = retweet(&mut rrng, v, &source, user, ms, low);
                emit(j, &tdir, &t, rrng.chance(0.5), &mut stats)?;
            }
        }
        stats.retweets = n;
    }
    Ok(stats)
}

/// Creates OUT_DIR, or checks that it is an empty directory (unless `force`).
fn prepare(out: &Path, force: bool) -> Result<(), String> {
    match fs::read_dir(out) {
        Ok(mut entries) => {
            if !force && entries.next().is_some() {
                return Err(format!(
                    "{} is not empty (pass --force to write into it anyway)",
                    out.display()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => make_dir(out),
        Err(e) => Err(format!(
            "cannot use {} as the output directory: {e}",
            out.display()
        )),
    }
}

fn run(args: &Args) -> Result<Stats, String> {
    prepare(&args.out_dir, args.force)?;
    let ctx = Ctx {
        out: args.out_dir.clone(),
        n: u64::from(args.threads),
        seed: args.seed,
        retweets: args.retweets,
        v: Vocab::new(),
    };
    (0..ctx.n)
        .into_par_iter()
        .map_init(J::default, |j, idx| gen_thread(&ctx, idx, j))
        .try_reduce(Stats::default, |a, b| Ok(a.add(b)))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(s) => {
            println!(
                "{{\"threads\": {}, \"replies\": {}, \"retweets\": {}, \"files\": {}, \"bytes\": {}}}",
                s.threads, s.replies, s.retweets, s.files, s.bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen_corpus: error: {e}");
            ExitCode::FAILURE
        }
    }
}
