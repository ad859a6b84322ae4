//! Attribute identities and values (OSD-2 r05 §4.7, §7.1).

/// One attribute: (page, number). Page ranges by object type: user object 0x0..0x2FFFFFFF,
/// partition 0x30000000.., collection 0x60000000.., root 0x90000000.., any type
/// 0xF0000000..0xFFFFFFFD, Current Command 0xFFFFFFFE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttrId {
    pub page: u32,
    pub number: u32,
}

impl AttrId {
    pub const fn new(page: u32, number: u32) -> Self {
        AttrId { page, number }
    }

    /// Attribute number 0xFFFFFFFF in a get list means "every attribute of the page".
    pub const ALL_IN_PAGE: u32 = 0xFFFF_FFFF;

    pub fn is_all_in_page(&self) -> bool {
        self.number == Self::ALL_IN_PAGE
    }
}

/// An attribute to set. An empty value deletes the attribute (OSD-2 §5.2.2.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribute {
    pub id: AttrId,
    pub value: Vec<u8>,
}

/// An attribute as retrieved: `None` is "undefined" (length 0xFFFF on the wire).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetrievedAttr {
    pub id: AttrId,
    pub value: Option<Vec<u8>>,
}

/// What a command asks to get, decoded from the CDB's get/set attribute parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum GetAttrs {
    #[default]
    None,
    /// Page format: every attribute of one page.
    Page { page: u32, allocation_len: u32 },
    /// List format: these attributes (a number of 0xFFFFFFFF expands to the whole page).
    List { ids: Vec<AttrId>, allocation_len: u32 },
}

/// One entry of a multi-object retrieved attributes list (list type 0xE, GET MEMBER
/// ATTRIBUTES): an attribute of one member object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAttr {
    pub object_id: u64,
    pub attr: RetrievedAttr,
}
