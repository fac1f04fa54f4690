/// The `aps` dictionary of a payload, as the guide's Table 3-1 defines it.
public struct APS: Hashable, Sendable {
    /// The alert: a message, or a dictionary of Table 3-2's keys.
    public enum Alert: Hashable, Sendable {
        case text(String)
        case dictionary(AlertDictionary)
    }

    public var alert: Alert?
    /// The badge number; 0 removes the badge, nil leaves it unchanged.
    public var badge: Int?
    /// A sound file's name, or `default`.
    public var sound: String?
    /// Wake the app in the background (`content-available: 1`).
    public var contentAvailable: Bool
    /// The identifier of a notification category (custom actions).
    public var category: String?
    /// Keys of `aps` that Table 3-1 does not define, written after the ones it does.
    public var other: [JSONMember]

    public init(
        alert: Alert? = nil,
        badge: Int? = nil,
        sound: String? = nil,
        contentAvailable: Bool = false,
        category: String? = nil,
        other: [JSONMember] = []
    ) {
        self.alert = alert
        self.badge = badge
        self.sound = sound
        self.contentAvailable = contentAvailable
        self.category = category
        self.other = other
    }

    var jsonValue: JSONValue {
        var members: [JSONMember] = []
        switch self.alert {
        case .text(let text)?: members.append(JSONMember("alert", .string(text)))
        case .dictionary(let dictionary)?: members.append(JSONMember("alert", dictionary.jsonValue))
        case nil: break
        }
        if let badge { members.append(JSONMember("badge", .int(badge))) }
        if let sound { members.append(JSONMember("sound", .string(sound))) }
        if self.contentAvailable { members.append(JSONMember("content-available", .int(1))) }
        if let category { members.append(JSONMember("category", .string(category))) }
        return .object(members + self.other)
    }
}

/// The alert dictionary: every key of the guide's Table 3-2.
public struct AlertDictionary: Hashable, Sendable {
    /// A key whose value may be a string or an explicit `null` (Table 3-2 allows both for some keys:
    /// `action-loc-key: null` shows an alert with an OK button only).
    public enum Nullable: Hashable, Sendable {
        case value(String)
        case null
    }

    public var title: String?
    public var body: String?
    public var titleLocKey: Nullable?
    public var titleLocArgs: [String]?
    public var actionLocKey: Nullable?
    public var locKey: String?
    public var locArgs: [String]?
    public var launchImage: String?

    public init(
        title: String? = nil,
        body: String? = nil,
        titleLocKey: Nullable? = nil,
        titleLocArgs: [String]? = nil,
        actionLocKey: Nullable? = nil,
        locKey: String? = nil,
        locArgs: [String]? = nil,
        launchImage: String? = nil
    ) {
        self.title = title
        self.body = body
        self.titleLocKey = titleLocKey
        self.titleLocArgs = titleLocArgs
        self.actionLocKey = actionLocKey
        self.locKey = locKey
        self.locArgs = locArgs
        self.launchImage = launchImage
    }

    var jsonValue: JSONValue {
        var members: [JSONMember] = []
        func add(_ key: String, _ value: String?) {
            if let value { members.append(JSONMember(key, .string(value))) }
        }
        func add(_ key: String, _ value: Nullable?) {
            switch value {
            case .value(let text)?: members.append(JSONMember(key, .string(text)))
            case .null?: members.append(JSONMember(key, .null))
            case nil: break
            }
        }
        func add(_ key: String, _ value: [String]?) {
            if let value { members.append(JSONMember(key, .array(value.map { .string($0) }))) }
        }
        add("title", self.title)
        add("body", self.body)
        add("title-loc-key", self.titleLocKey)
        add("title-loc-args", self.titleLocArgs)
        add("action-loc-key", self.actionLocKey)
        add("loc-key", self.locKey)
        add("loc-args", self.locArgs)
        add("launch-image", self.launchImage)
        return .object(members)
    }
}
